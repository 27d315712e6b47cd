"""Queries of the wallets users hold: the challenge to sign, the link, the receiving wallet, the
unlink (statements built once, see users.repository)."""

import uuid
from datetime import datetime
from typing import Any, NamedTuple

from sqlalchemy import bindparam, delete, func, select, update

from tessera.chain.keys import CUSTODIAL
from tessera.db import Rows, Transaction, table_of
from tessera.models import ProductItem, User, UserWallet, WalletChallenge
from tessera.users.repository import Wallet, WalletRow, get_user_row, read_profile
from tessera.users.schemas import UserRef

_WALLETS, _CHALLENGES, _USERS = table_of(UserWallet), table_of(WalletChallenge), table_of(User)
_ITEMS = table_of(ProductItem)
_LATEST_CHALLENGE = (
    select(_CHALLENGES)
    .where(
        _CHALLENGES.c.user_id == bindparam("user_id"),
        _CHALLENGES.c.public_key == bindparam("public_key"),
    )
    .order_by(_CHALLENGES.c.created_at.desc())
    .limit(1)
)
_USE_CHALLENGE = (
    update(_CHALLENGES)
    .where(_CHALLENGES.c.id == bindparam("id"), _CHALLENGES.c.used_at.is_(None))
    .values(used_at=bindparam("used_at"))
)
_WALLET_BY_KEY = select(_WALLETS.c.id).where(
    _WALLETS.c.project_id == bindparam("project_id"),
    _WALLETS.c.public_key == bindparam("public_key"),
)
_WALLET = select(_WALLETS).where(
    _WALLETS.c.project_id == bindparam("project_id"), _WALLETS.c.id == bindparam("id")
)
_RECEIVING = (
    update(_USERS)
    .where(_USERS.c.id == bindparam("id"))
    .values(receiving_wallet_id=bindparam("wallet_id"), updated_at=bindparam("updated_at"))
)
_NO_LONGER_RECEIVING = (
    update(_USERS)
    .where(_USERS.c.receiving_wallet_id == bindparam("wallet_id"))
    .values(receiving_wallet_id=None, updated_at=bindparam("updated_at"))
)
_NFTS_IN = select(func.count()).where(_ITEMS.c.nft_wallet_id == bindparam("wallet_id"))
_UNLINK = delete(_WALLETS).where(_WALLETS.c.id == bindparam("id"))
_RECEIVING_OF = select(_USERS.c.receiving_wallet_id).where(_USERS.c.id == bindparam("id"))
_WALLETS_OF = (
    select(_WALLETS)
    .where(_WALLETS.c.user_id == bindparam("user_id"))
    .order_by(_WALLETS.c.created_at)
)


class ChallengeRow(NamedTuple):
    """A challenge's row (``wallet_challenges``)."""

    project_id: uuid.UUID
    user_id: uuid.UUID
    public_key: bytes
    message: str
    expires_at: int
    used_at: datetime | None
    created_at: datetime
    id: uuid.UUID


class UserWithWallets(NamedTuple):
    """A user with all its wallets and the one that receives mints: ``UserWallets``' fields."""

    id: uuid.UUID
    is_activated: bool
    activated_on: datetime | None
    first_name: str | None
    last_name: str | None
    email: str
    reference_id: str | None
    wallets: list[Wallet]
    receiving_wallet_id: uuid.UUID


async def add_challenge(tx: Transaction, challenge: dict[str, Any]) -> None:
    await tx.insert(WalletChallenge, [challenge])


async def latest_challenge(
    rows: Rows, user_id: uuid.UUID, public_key: bytes
) -> ChallengeRow | None:
    """The challenge asked last for the user and the key, or None."""
    return await rows.first(_LATEST_CHALLENGE, ChallengeRow, user_id=user_id, public_key=public_key)


async def use_challenge(tx: Transaction, challenge_id: uuid.UUID, used_at: datetime) -> bool:
    """Mark the challenge answered; False when it was answered already (by another request)."""
    return bool(await tx.execute(_USE_CHALLENGE, id=challenge_id, used_at=used_at))


async def link(tx: Transaction, wallet: dict[str, Any]) -> None:
    """Write the wallet; a key the project has linked already raises IntegrityError."""
    await tx.insert(UserWallet, [wallet])


async def key_is_linked(rows: Rows, project_id: uuid.UUID, public_key: bytes) -> bool:
    """Whether a wallet of the project has the key."""
    found = await rows.scalar(_WALLET_BY_KEY, project_id=project_id, public_key=public_key)
    return found is not None


async def read_wallet(rows: Rows, project_id: uuid.UUID, wallet_id: uuid.UUID) -> WalletRow | None:
    return await rows.first(_WALLET, WalletRow, project_id=project_id, id=wallet_id)


async def choose_receiving(
    tx: Transaction, user_id: uuid.UUID, wallet_id: uuid.UUID, now: datetime
) -> None:
    await tx.execute(_RECEIVING, id=user_id, wallet_id=wallet_id, updated_at=now)


async def count_nfts_in(rows: Rows, wallet_id: uuid.UUID) -> int:
    """The NFTs of the project's items that sit in the wallet."""
    count: int = await rows.scalar(_NFTS_IN, wallet_id=wallet_id)
    return count


async def unlink(tx: Transaction, wallet_id: uuid.UUID, now: datetime) -> None:
    """Delete the wallet; the user it received mints for receives them in the first custodial
    wallet again."""
    await tx.execute(_NO_LONGER_RECEIVING, wallet_id=wallet_id, updated_at=now)
    await tx.execute(_UNLINK, id=wallet_id)


async def read_user_wallets(
    rows: Rows, project_id: uuid.UUID, user_id: uuid.UUID
) -> UserWithWallets | None:
    """The user with its wallets and the one that receives mints (the chosen one, else the
    first custodial one), or None (a read for ``Database.read``)."""
    profile = await read_profile(rows, project_id, UserRef("id", user_id))
    if profile is None:
        return None
    chosen: uuid.UUID | None = await rows.scalar(_RECEIVING_OF, id=user_id)
    receiving = chosen or next(w.id for w in profile.wallets if w.custody == CUSTODIAL)
    return UserWithWallets._make((*profile, receiving))


async def read_wallets_of(rows: Rows, project_id: uuid.UUID, ref: UserRef) -> list[WalletRow]:
    """The wallets of the user ``ref`` names, oldest first (a read for ``Database.read``; 404
    when the project has no such user)."""
    user = await get_user_row(rows, project_id, ref)
    return await rows.all(_WALLETS_OF, WalletRow, user_id=user.id)
