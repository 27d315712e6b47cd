import uuid
from datetime import datetime
from enum import StrEnum

from sqlalchemy import BigInteger, Double, ForeignKey, Index, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from tessera.models.base import Base, IdMixin, UTCDateTime, Uuid, text_enum, utcnow


class Seat(IdMixin, Base):
    """One seat of an event's seating plan, named by its area, row and number (unique in the
    event: a plan sent again keeps a seat's id by its name). Its status is its row's alone, so
    that a statement which locks the row sees it whole: sold (``item_id``), blocked, held
    (``hold_id`` until ``held_until``, Unix seconds; no end while a pending order holds it), or
    available. The positions order the plan as sent: areas, their rows (the front first), and
    the seats of a row by their numbers (``seats.rules.natural``)."""

    __tablename__ = "seats"
    __table_args__ = (
        UniqueConstraint("event_id", "area", "row", "number"),
        Index("ix_seats_event_place", "event_id", "area_position", "row_position", "seat_position"),
    )

    project_id: Mapped[uuid.UUID] = mapped_column(
        Uuid, ForeignKey("projects.id", ondelete="CASCADE")
    )
    event_id: Mapped[uuid.UUID] = mapped_column(Uuid, ForeignKey("events.id", ondelete="CASCADE"))
    area: Mapped[str] = mapped_column(String(64))
    row: Mapped[str] = mapped_column(String(32))
    number: Mapped[str] = mapped_column(String(16))
    category: Mapped[str | None] = mapped_column(String(64))
    x: Mapped[float | None] = mapped_column(Double)
    y: Mapped[float | None] = mapped_column(Double)
    area_position: Mapped[int] = mapped_column(BigInteger)
    row_position: Mapped[int] = mapped_column(BigInteger)
    seat_position: Mapped[int] = mapped_column(BigInteger)
    blocked: Mapped[bool] = mapped_column(default=False)
    hold_id: Mapped[uuid.UUID | None] = mapped_column(Uuid, index=True)
    held_until: Mapped[int | None] = mapped_column(BigInteger)
    # The item sold this seat (``product_items.seat_id`` names it back).
    item_id: Mapped[uuid.UUID | None] = mapped_column(Uuid)


class HoldStatus(StrEnum):
    HELD = "held"  # until expires_at, or, with an order line, until the order ends
    SOLD = "sold"
    RELEASED = "released"


class SeatHold(IdMixin, Base):
    """Seats of a product kept for one buyer: the seats whose ``hold_id`` is this one's."""

    __tablename__ = "seat_holds"

    project_id: Mapped[uuid.UUID] = mapped_column(
        Uuid, ForeignKey("projects.id", ondelete="CASCADE")
    )
    product_id: Mapped[uuid.UUID] = mapped_column(
        Uuid, ForeignKey("products.id", ondelete="CASCADE"), index=True
    )
    event_id: Mapped[uuid.UUID] = mapped_column(Uuid)
    status: Mapped[HoldStatus] = mapped_column(text_enum(HoldStatus), default=HoldStatus.HELD)
    expires_at: Mapped[int] = mapped_column(BigInteger)
    # A pending order's line it was given to: the seats are kept until the order is completed
    # (they are the items') or cancelled (they are free again).
    order_item_id: Mapped[uuid.UUID | None] = mapped_column(Uuid, index=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
