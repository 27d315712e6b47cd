import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import JSON, BigInteger, ForeignKey, Index
from sqlalchemy.orm import Mapped, mapped_column

from tessera.models.base import Base, UTCDateTime, Uuid


class Reconciliation(Base):
    """A product's last reconciliation with the chain (``tessera.products.reconciliation``):
    one row per product, written anew by each check, so that the console, ``/metrics`` and the
    next check (which reports a drift once, when it appears) can read it."""

    __tablename__ = "reconciliations"
    __table_args__ = (Index("ix_reconciliations_project_checked", "project_id", "checked_at"),)

    product_id: Mapped[uuid.UUID] = mapped_column(
        Uuid, ForeignKey("products.id", ondelete="CASCADE"), primary_key=True
    )
    project_id: Mapped[uuid.UUID] = mapped_column(
        Uuid, ForeignKey("projects.id", ondelete="CASCADE")
    )
    checked_at: Mapped[datetime] = mapped_column(UTCDateTime)
    items_checked: Mapped[int] = mapped_column(BigInteger)
    # The findings as the API answers them: [{"kind", "item_id", "database", "chain"}].
    findings: Mapped[list[dict[str, Any]]] = mapped_column(JSON)
