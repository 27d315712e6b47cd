import uuid
from datetime import datetime

from sqlalchemy import BigInteger, ForeignKey, Index, LargeBinary, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column, relationship

from tessera.models.base import (
    Base,
    CustodialKeyMixin,
    IdMixin,
    TimestampMixin,
    UTCDateTime,
    Uuid,
    utcnow,
)


class User(IdMixin, TimestampMixin, Base):
    __tablename__ = "users"
    __table_args__ = (
        UniqueConstraint("project_id", "email"),
        UniqueConstraint("project_id", "reference_id"),
        UniqueConstraint("project_id", "number"),
    )

    project_id: Mapped[uuid.UUID] = mapped_column(
        Uuid, ForeignKey("projects.id", ondelete="CASCADE")
    )
    # 1, 2, 3... in the order the project's users were created (the project's ``user_count``
    # when it was): users/fetch reads a page as the users numbered after its offset. Users
    # leave only with their project, so the numbers have no gaps.
    number: Mapped[int] = mapped_column(BigInteger)
    email: Mapped[str] = mapped_column(String(320))
    first_name: Mapped[str | None] = mapped_column(String(255))
    last_name: Mapped[str | None] = mapped_column(String(255))
    reference_id: Mapped[str | None] = mapped_column(String(255))
    is_activated: Mapped[bool] = mapped_column(default=False)
    activated_on: Mapped[datetime | None] = mapped_column(UTCDateTime)
    reputation: Mapped[int] = mapped_column(BigInteger, default=0)
    # The wallet mints go to; None: the first custodial wallet. (No foreign key: the two
    # tables would point at each other; the wallets service keeps it to the user's wallets.)
    receiving_wallet_id: Mapped[uuid.UUID | None] = mapped_column(Uuid)

    wallets: Mapped[list["UserWallet"]] = relationship(
        lazy="raise", order_by="UserWallet.created_at", passive_deletes=True
    )


class UserWallet(IdMixin, CustodialKeyMixin, Base):
    """A custodial wallet (a sealed secret), or a ``user-controlled`` one the user linked by
    signing a challenge (no secret here)."""

    __tablename__ = "user_wallets"
    # The worker finds the key that owns an NFT on chain by its public key; a key is linked once
    # per project.
    __table_args__ = (
        Index("ix_user_wallets_project_public_key", "project_id", "public_key", unique=True),
    )

    secret_key_id: Mapped[str | None] = mapped_column(String(64))  # type: ignore[assignment]
    secret_blob: Mapped[bytes | None] = mapped_column(LargeBinary)  # type: ignore[assignment]

    user_id: Mapped[uuid.UUID] = mapped_column(
        Uuid, ForeignKey("users.id", ondelete="CASCADE"), index=True
    )
    project_id: Mapped[uuid.UUID] = mapped_column(
        Uuid, ForeignKey("projects.id", ondelete="CASCADE"), index=True
    )
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class ReputationEntry(IdMixin, Base):
    """Every change of a user's reputation balance, with the balance it left."""

    __tablename__ = "reputation_entries"

    project_id: Mapped[uuid.UUID] = mapped_column(
        Uuid, ForeignKey("projects.id", ondelete="CASCADE")
    )
    user_id: Mapped[uuid.UUID] = mapped_column(
        Uuid, ForeignKey("users.id", ondelete="CASCADE"), index=True
    )
    delta: Mapped[int] = mapped_column(BigInteger)
    balance: Mapped[int] = mapped_column(BigInteger)
    reason: Mapped[str] = mapped_column(String(255))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class WalletChallenge(IdMixin, Base):
    """A text a user signs to prove they hold a wallet; answered once, before it expires."""

    __tablename__ = "wallet_challenges"

    project_id: Mapped[uuid.UUID] = mapped_column(
        Uuid, ForeignKey("projects.id", ondelete="CASCADE")
    )
    user_id: Mapped[uuid.UUID] = mapped_column(
        Uuid, ForeignKey("users.id", ondelete="CASCADE"), index=True
    )
    public_key: Mapped[bytes] = mapped_column(LargeBinary(32))
    message: Mapped[str] = mapped_column(String(512))
    expires_at: Mapped[int] = mapped_column(BigInteger)  # Unix seconds
    used_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
