import secrets
import uuid
from datetime import datetime

from sqlalchemy import BigInteger, ForeignKey, Index, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from tessera.models.base import Base, IdMixin, TimestampMixin, UTCDateTime, Uuid, utcnow

TOKEN_SCHEME = "tcl"  # noqa: S105 - a claim link token's prefix, not a secret


def new_link_token() -> tuple[str, str]:
    """A new claim link's token (192 bits) and its hint, the first characters, which tell
    links apart where the token is not shown."""
    token = f"{TOKEN_SCHEME}_{secrets.token_urlsafe(24)}"
    return token, token[: len(TOKEN_SCHEME) + 7]


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
    # Items one claim issues: 1, or a waiting list entry's quantity (its offer's link).
    quantity: Mapped[int] = mapped_column(BigInteger, default=1, server_default="1")
    # A seated product's offer: the seats kept for it, which its claim's items get.
    hold_id: Mapped[uuid.UUID | None] = mapped_column(Uuid)


class Claim(IdMixin, Base):
    """One item a person's claim through a link issued: an email claims once per link, one
    row per item (``ClaimLink.quantity`` of them)."""

    __tablename__ = "claims"
    __table_args__ = (Index("ix_claims_link_email", "link_id", "email"),)

    link_id: Mapped[uuid.UUID] = mapped_column(
        Uuid, ForeignKey("claim_links.id", ondelete="CASCADE")
    )
    email: Mapped[str] = mapped_column(String(320))
    user_id: Mapped[uuid.UUID] = mapped_column(Uuid, ForeignKey("users.id"), index=True)
    item_id: Mapped[uuid.UUID] = mapped_column(Uuid, ForeignKey("product_items.id"))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
