from sqlalchemy import Float, String
from sqlalchemy.orm import Mapped, mapped_column

from tessera.models.base import Base


class RateBucket(Base):
    """A credential's token bucket, shared by every process on PostgreSQL (see
    ``auth.rate_limits``): the tokens left at ``at`` (Unix seconds)."""

    __tablename__ = "rate_buckets"

    key: Mapped[str] = mapped_column(String(200), primary_key=True)
    tokens: Mapped[float] = mapped_column(Float)
    at: Mapped[float] = mapped_column(Float)
