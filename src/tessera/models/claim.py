import uuid
from datetime import datetime

from sqlalchemy import BigInteger, ForeignKey, Index, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from tessera.models.base import Base, IdMixin, TimestampMixin, UTCDateTime, Uuid, utcnow


class ClaimLink(IdMixin, TimestampMixin, Base):
    """A URL through which people claim items of an ``is_claimable`` product. The token is shown
    once; only its keyed hash is stored (as for API keys), and ``token_hint`` tells links apart."""

    __tablename__ = "claim_links"
    __table_args__ = (
        UniqueConstraint("project_id", "reference_id"),
        Index("ix_claim_links_product_created", "product_id", "created_at", "id"),
    )

    project_id: Mapped[uuid.UUID] = mapped_column(
        Uuid, ForeignKey("projects.id", ondelete="CASCADE")
    )
    product_id: Mapped[uuid.UUID] = mapped_column(Uuid, ForeignKey("products.id"))
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    token_hint: Mapped[str] = mapped_column(String(16))
    max_claims: Mapped[int] = mapped_column(BigInteger)
    # Claims counted so far: bumped under the link's row lock, never past max_claims.
    claims: Mapped[int] = mapped_column(BigInteger, default=0)
    expires_at: Mapped[int | None] = mapped_column(BigInteger)  # Unix seconds
    email: Mapped[str | None] = mapped_column(String(320))  # only this person may claim
    reference_id: Mapped[str | None] = mapped_column(String(255))
    revoked_at: Mapped[datetime | None] = mapped_column(UTCDateTime)


class Claim(IdMixin, Base):
    """One person's claim through a link: the item it issued. An email claims once per link."""

    __tablename__ = "claims"
    __table_args__ = (UniqueConstraint("link_id", "email"),)

    link_id: Mapped[uuid.UUID] = mapped_column(
        Uuid, ForeignKey("claim_links.id", ondelete="CASCADE")
    )
    email: Mapped[str] = mapped_column(String(320))
    user_id: Mapped[uuid.UUID] = mapped_column(Uuid, ForeignKey("users.id"), index=True)
    item_id: Mapped[uuid.UUID] = mapped_column(Uuid, ForeignKey("product_items.id"))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
