import uuid
from datetime import datetime

from sqlalchemy import ForeignKey, Index, Integer, LargeBinary, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from tessera.models.base import Base, IdMixin, UTCDateTime, Uuid, utcnow


class IdempotencyKey(IdMixin, Base):
    """A write sent with an ``Idempotency-Key``: the request's fingerprint, and once it has
    answered, the answer, replayed to a retry of the same request until ``expires_at``.

    A key is the project's when a credential of the project sent it (``scope`` empty), and a
    claim link's when it came with a claim through that link (``scope`` is the link's id): two
    people claiming through two links never share a key."""

    __tablename__ = "idempotency_keys"
    __table_args__ = (
        UniqueConstraint("project_id", "scope", "key"),
        Index("ix_idempotency_keys_expires_at", "expires_at"),
    )

    project_id: Mapped[uuid.UUID] = mapped_column(
        Uuid, ForeignKey("projects.id", ondelete="CASCADE")
    )
    scope: Mapped[str] = mapped_column(String(36), default="")
    key: Mapped[str] = mapped_column(String(255))
    fingerprint: Mapped[str] = mapped_column(String(64))  # SHA-256 of method, path and body
    # None while the first request runs (until running_until: then it is taken as abandoned).
    status_code: Mapped[int | None] = mapped_column(Integer)
    headers: Mapped[str | None] = mapped_column(Text)  # JSON [[name, value], ...]
    body: Mapped[bytes | None] = mapped_column(LargeBinary)
    running_until: Mapped[datetime] = mapped_column(UTCDateTime)
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
