import uuid
from datetime import datetime
from decimal import Decimal
from enum import StrEnum

from sqlalchemy import BigInteger, ForeignKey, Index, Numeric, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column, relationship

from tessera.models.base import Base, IdMixin, TimestampMixin, UTCDateTime, Uuid, text_enum, utcnow
from tessera.models.user import User


class OrderStatus(StrEnum):
    PENDING = "pending"
    COMPLETED = "completed"
    CANCELLED = "cancelled"


class Order(IdMixin, TimestampMixin, Base):
    __tablename__ = "orders"
    __table_args__ = (
        UniqueConstraint("project_id", "order_number"),
        Index("ix_orders_project_created", "project_id", "created_at", "id"),
    )

    project_id: Mapped[uuid.UUID] = mapped_column(
        Uuid, ForeignKey("projects.id", ondelete="CASCADE")
    )
    order_number: Mapped[str] = mapped_column(String(64))
    user_id: Mapped[uuid.UUID] = mapped_column(Uuid, ForeignKey("users.id"), index=True)
    status: Mapped[OrderStatus] = mapped_column(text_enum(OrderStatus))

    user: Mapped[User] = relationship(lazy="raise")
    lines: Mapped[list["OrderItem"]] = relationship(lazy="raise", order_by="OrderItem.position")


class OrderItem(IdMixin, Base):
    """One line of an order: a product, a quantity and the unit price at order time (a sale)."""

    __tablename__ = "order_items"
    __table_args__ = (Index("ix_order_items_product_created", "product_id", "created_at", "id"),)

    order_id: Mapped[uuid.UUID] = mapped_column(
        Uuid, ForeignKey("orders.id", ondelete="CASCADE"), index=True
    )
    product_id: Mapped[uuid.UUID] = mapped_column(Uuid, ForeignKey("products.id"))
    position: Mapped[int]
    quantity: Mapped[int] = mapped_column(BigInteger)
    unit_price: Mapped[Decimal] = mapped_column(Numeric(14, 2))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
