import uuid
from datetime import datetime

from sqlalchemy import ForeignKey, String
from sqlalchemy.orm import Mapped, mapped_column

from tessera.models.base import Base, UTCDateTime, Uuid, utcnow


class PassRegistration(Base):
    """A device that keeps a ticket's Apple Wallet pass current (the PassKit web service,
    ``tessera.passes``): its library id, the pass (``serial``: the item's id) and the push
    token Apple gave it. ``owner_id`` is the holder whose pass the device registered: after a
    transfer that device still reads the pass, voided, while the new holder's passes carry the
    ticket."""

    __tablename__ = "pass_registrations"

    device: Mapped[str] = mapped_column(String(128), primary_key=True)
    serial: Mapped[uuid.UUID] = mapped_column(
        Uuid, ForeignKey("product_items.id", ondelete="CASCADE"), primary_key=True, index=True
    )
    owner_id: Mapped[uuid.UUID] = mapped_column(Uuid)
    push_token: Mapped[str] = mapped_column(String(256))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
