from sqlalchemy import BigInteger, Float, Index, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from tessera.models.base import Base


class RateBucket(Base):
    """A credential's token bucket, shared by every process (see ``auth.rate_limits``): the
    tokens left at ``at`` (Unix seconds)."""

    __tablename__ = "rate_buckets"

    key: Mapped[str] = mapped_column(String(200), primary_key=True)
    tokens: Mapped[float] = mapped_column(Float)
    at: Mapped[float] = mapped_column(Float)


class RateHit(Base):
    """One attempt a moving-window limit let through (``db.windows``: claims, sign-ins),
    shared by every process: it counts against ``key`` until ``expires`` (Unix seconds), when
    it leaves the window. Rows are written and deleted, never changed; ``id`` only names one."""

    __tablename__ = "rate_hits"
    __table_args__ = (
        Index("ix_rate_hits_key_expires", "key", "expires"),
        Index("ix_rate_hits_expires", "expires"),
    )

    id: Mapped[int] = mapped_column(
        BigInteger().with_variant(Integer(), "sqlite"), primary_key=True, autoincrement=True
    )
    key: Mapped[str] = mapped_column(String(200))
    expires: Mapped[float] = mapped_column(Float)
