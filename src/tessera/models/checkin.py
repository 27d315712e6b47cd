import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    ForeignKey,
    Index,
    LargeBinary,
    String,
    UniqueConstraint,
)
from sqlalchemy.orm import Mapped, mapped_column

from tessera.models.base import Base, IdMixin, UTCDateTime, Uuid, utcnow


class Checkin(IdMixin, Base):
    """One scan at the door (``POST /v1/checkins``, the console's door), whatever its outcome:
    the answer it got is kept, so that the same ``nonce`` again gets it again and counts once.
    An ``ok`` scan redeemed one use of its item and checked its holder in; what it changed is
    kept too (the redemption, the attendee's check-in time before it), so that it can be
    annulled within ``TESSERA_CHECKIN_ANNUL_SECONDS`` (``annulled_at``).

    A scan made offline and uploaded later (``POST /v1/checkins/batch``) keeps its ``device`` and
    when it was made (``scanned_at``); one refused because another scan, recorded before it was
    uploaded, had used the ticket meanwhile is a conflict (``conflict_of``: that scan)."""

    __tablename__ = "checkins"
    __table_args__ = (
        UniqueConstraint("project_id", "nonce"),
        Index("ix_checkins_project_created", "project_id", "created_at"),
    )

    project_id: Mapped[uuid.UUID] = mapped_column(
        Uuid, ForeignKey("projects.id", ondelete="CASCADE")
    )
    nonce: Mapped[str] = mapped_column(String(128))
    # ok | already_checked_in | wrong_event | unknown | invalid | revoked | held_outside
    status: Mapped[str] = mapped_column(String(24))
    answer: Mapped[dict[str, Any]] = mapped_column(JSON)
    source: Mapped[str] = mapped_column(String(16))  # api | console | offline
    event_id: Mapped[uuid.UUID | None] = mapped_column(Uuid)  # the event the scan asked for
    item_id: Mapped[uuid.UUID | None] = mapped_column(
        Uuid, ForeignKey("product_items.id"), index=True
    )
    attendee_id: Mapped[uuid.UUID | None] = mapped_column(Uuid)
    redemption_id: Mapped[uuid.UUID | None] = mapped_column(Uuid)
    checked_in_at: Mapped[int | None] = mapped_column(BigInteger)
    previous_checked_in_at: Mapped[int | None] = mapped_column(BigInteger)
    previous_redeemed_at: Mapped[int | None] = mapped_column(BigInteger)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    annulled_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    device: Mapped[str | None] = mapped_column(String(128))
    scanned_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    conflict_of: Mapped[uuid.UUID | None] = mapped_column(Uuid, ForeignKey("checkins.id"))


class CheckinKey(IdMixin, Base):
    """A project's Ed25519 key for ticket secrets (``tessera.ticket_keys``): the newest live one
    signs, every live one verifies; a retired key verifies nothing. ``kid`` is 4 bytes (8 hex
    digits) carried in each secret it signs; the private key is sealed
    (``tessera.toolkit.crypto``)."""

    __tablename__ = "checkin_keys"
    __table_args__ = (UniqueConstraint("project_id", "kid"),)

    project_id: Mapped[uuid.UUID] = mapped_column(
        Uuid, ForeignKey("projects.id", ondelete="CASCADE")
    )
    kid: Mapped[str] = mapped_column(String(8))
    public_key: Mapped[bytes] = mapped_column(LargeBinary(32))
    secret_key_id: Mapped[str] = mapped_column(String(64))
    secret_blob: Mapped[bytes] = mapped_column(LargeBinary)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    retired_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
