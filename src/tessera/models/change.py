import uuid
from datetime import datetime
from enum import StrEnum

from sqlalchemy import (
    JSON,
    BigInteger,
    FetchedValue,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    String,
    Text,
)
from sqlalchemy.orm import Mapped, mapped_column

# A bigint key counted by the database: a bigserial on PostgreSQL, the rowid on SQLite
from tessera.models.base import Base, IdMixin, UTCDateTime, Uuid, new_id, utcnow

# (``sqlite_autoincrement``: never reused, even after the newest rows are purged).
Sequence = BigInteger().with_variant(Integer(), "sqlite")


class Change(Base):
    """One state change a client cares about (``tessera.changes.EventType``), written in the
    transaction that made it: the outbox that ``GET /v1/changes`` reads and webhooks deliver.

    Its place in the feed is ``(txid, seq)``. On PostgreSQL ``txid`` is the writing
    transaction's id (``pg_current_xact_id()``, the migration's default) and a row is shown
    only once every transaction below the oldest one still running has ended, so a reader
    never passes a place where a slower transaction's row could still appear. On SQLite, one
    writer at a time, ``txid`` is 0 and ``seq`` alone is commit order.
    """

    __tablename__ = "changes"
    __table_args__ = (
        Index("ix_changes_project_place", "project_id", "txid", "seq"),
        Index("ix_changes_created_at", "created_at"),
        {"sqlite_autoincrement": True},
    )

    seq: Mapped[int] = mapped_column(Sequence, primary_key=True, autoincrement=True)
    txid: Mapped[int] = mapped_column(BigInteger, server_default=FetchedValue())
    id: Mapped[uuid.UUID] = mapped_column(Uuid, unique=True, default=new_id)
    project_id: Mapped[uuid.UUID] = mapped_column(
        Uuid, ForeignKey("projects.id", ondelete="CASCADE")
    )
    type: Mapped[str] = mapped_column(String(32))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    data: Mapped[str] = mapped_column(Text)  # the object as the API renders it, JSON


class WebhookEndpoint(IdMixin, Base):
    """Where a project's changes are delivered, signed with ``secret`` (Standard Webhooks),
    one at a time and in feed order, from the place after ``(after_txid, after_seq)``."""

    __tablename__ = "webhook_endpoints"
    __table_args__ = (Index("ix_webhook_endpoints_due", "enabled", "next_attempt_at"),)

    project_id: Mapped[uuid.UUID] = mapped_column(
        Uuid, ForeignKey("projects.id", ondelete="CASCADE"), index=True
    )
    url: Mapped[str] = mapped_column(String(2048))
    event_types: Mapped[list[str] | None] = mapped_column(JSON)  # None: every type
    secret_key_id: Mapped[str] = mapped_column(
        String(64)
    )  # the secret, sealed (tessera.toolkit.crypto)
    secret_blob: Mapped[bytes] = mapped_column(LargeBinary)
    secret_hint: Mapped[str] = mapped_column(String(16))
    enabled: Mapped[bool] = mapped_column(default=True)
    disabled_reason: Mapped[str | None] = mapped_column(String(255))
    # The last change delivered (or passed over: not one of event_types).
    after_txid: Mapped[int] = mapped_column(BigInteger)
    after_seq: Mapped[int] = mapped_column(BigInteger)
    # PostgreSQL: the snapshot of the transaction that created the endpoint. A change that it
    # saw committed (above the start place, from a transaction younger than the oldest then
    # running) is passed over: it came before the endpoint.
    start_snapshot: Mapped[str | None] = mapped_column(Text)
    next_attempt_at: Mapped[datetime] = mapped_column(UTCDateTime)
    failures: Mapped[int] = mapped_column(Integer, default=0)  # in a row, on the next change
    failing_since: Mapped[datetime | None] = mapped_column(UTCDateTime)
    # A dispatcher delivering to it holds it until then (renewed at each change).
    leased_by: Mapped[str | None] = mapped_column(String(32))
    leased_until: Mapped[datetime | None] = mapped_column(UTCDateTime)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class DeliveryStatus(StrEnum):
    """Where a delivery stands (``sending`` while a dispatcher holds it is shown as pending)."""

    PENDING = "pending"  # a replay asked for, not sent yet
    SUCCEEDED = "succeeded"
    FAILED = "failed"


class WebhookDelivery(IdMixin, Base):
    """One attempt to deliver a change to an endpoint, or a replay asked for (``pending``)."""

    __tablename__ = "webhook_deliveries"
    __table_args__ = (
        Index("ix_webhook_deliveries_endpoint", "endpoint_id", "created_at", "id"),
        Index("ix_webhook_deliveries_pending", "status", "created_at"),
    )

    endpoint_id: Mapped[uuid.UUID] = mapped_column(
        Uuid, ForeignKey("webhook_endpoints.id", ondelete="CASCADE")
    )
    change_id: Mapped[uuid.UUID] = mapped_column(Uuid)  # the change may be purged before it
    change_type: Mapped[str] = mapped_column(String(32))
    replay: Mapped[bool] = mapped_column(default=False)
    status: Mapped[str] = mapped_column(String(16))  # pending, succeeded, failed
    response_status: Mapped[int | None] = mapped_column(Integer)
    response_body: Mapped[str | None] = mapped_column(Text)  # the first KiB
    error: Mapped[str | None] = mapped_column(String(500))
    duration_ms: Mapped[int | None] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
