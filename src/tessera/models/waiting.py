import uuid
from enum import StrEnum

from sqlalchemy import BigInteger, ForeignKey, Index, String, text
from sqlalchemy.orm import Mapped, mapped_column

from tessera.models.base import Base, IdMixin, TimestampMixin, Uuid, text_enum


class EntryStatus(StrEnum):
    WAITING = "waiting"  # in line
    OFFERED = "offered"  # a claim link is open for it, its stock kept
    CLAIMED = "claimed"  # the offer was claimed: the items are issued
    EXPIRED = "expired"  # the offer ran out unclaimed
    REMOVED = "removed"  # taken off the list (by the project)


IN_LINE = (EntryStatus.WAITING, EntryStatus.OFFERED)


class WaitingEntry(IdMixin, TimestampMixin, Base):
    """A person waiting for a product: in line by ``created_at`` (then ``id``), one live entry
    (waiting or offered) per email and product."""

    __tablename__ = "waiting_list_entries"
    __table_args__ = (
        Index("ix_waiting_list_line", "product_id", "status", "created_at", "id"),
        # The worker's round: offers that lapsed, lines that wait (``waiting.repository._DUE``).
        Index("ix_waiting_list_due", "status", "offer_expires_at"),
        Index(
            "uq_waiting_list_live_email",
            "product_id",
            "email",
            unique=True,
            sqlite_where=text("status IN ('waiting', 'offered')"),
            postgresql_where=text("status IN ('waiting', 'offered')"),
        ),
    )

    project_id: Mapped[uuid.UUID] = mapped_column(
        Uuid, ForeignKey("projects.id", ondelete="CASCADE")
    )
    product_id: Mapped[uuid.UUID] = mapped_column(
        Uuid, ForeignKey("products.id", ondelete="CASCADE")
    )
    email: Mapped[str] = mapped_column(String(320))
    first_name: Mapped[str | None] = mapped_column(String(255))
    quantity: Mapped[int] = mapped_column(BigInteger)
    status: Mapped[EntryStatus] = mapped_column(text_enum(EntryStatus), default=EntryStatus.WAITING)
    # Where its offer's link points: the server's public URL as the entry was made.
    base_url: Mapped[str] = mapped_column(String(2048))
    # The open (or last) offer: its claim link and until when it is open (Unix seconds).
    link_id: Mapped[uuid.UUID | None] = mapped_column(
        Uuid, ForeignKey("claim_links.id"), index=True
    )
    offered_at: Mapped[int | None] = mapped_column(BigInteger)
    offer_expires_at: Mapped[int | None] = mapped_column(BigInteger)
