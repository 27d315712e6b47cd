"""Statements of the wallets users hold: the challenge to sign, the link, the receiving wallet,
the unlink (built once, see users.repository)."""

from sqlalchemy import bindparam, delete, func, select, update

from tessera.db import table_of
from tessera.models import ProductItem, User, UserWallet, WalletChallenge

_WALLETS, _CHALLENGES, _USERS = table_of(UserWallet), table_of(WalletChallenge), table_of(User)
_ITEMS = table_of(ProductItem)
LATEST_CHALLENGE = (
    select(_CHALLENGES)
    .where(
        _CHALLENGES.c.user_id == bindparam("user_id"),
        _CHALLENGES.c.public_key == bindparam("public_key"),
    )
    .order_by(_CHALLENGES.c.created_at.desc())
    .limit(1)
)
USE_CHALLENGE = (
    update(_CHALLENGES)
    .where(_CHALLENGES.c.id == bindparam("id"), _CHALLENGES.c.used_at.is_(None))
    .values(used_at=bindparam("used_at"))
)
WALLET_BY_KEY = select(_WALLETS.c.id).where(
    _WALLETS.c.project_id == bindparam("project_id"),
    _WALLETS.c.public_key == bindparam("public_key"),
)
WALLET = select(_WALLETS).where(
    _WALLETS.c.project_id == bindparam("project_id"), _WALLETS.c.id == bindparam("id")
)
RECEIVING = (
    update(_USERS)
    .where(_USERS.c.id == bindparam("id"))
    .values(receiving_wallet_id=bindparam("wallet_id"), updated_at=bindparam("updated_at"))
)
NO_LONGER_RECEIVING = (
    update(_USERS)
    .where(_USERS.c.receiving_wallet_id == bindparam("wallet_id"))
    .values(receiving_wallet_id=None, updated_at=bindparam("updated_at"))
)
NFTS_IN = select(func.count()).where(_ITEMS.c.nft_wallet_id == bindparam("wallet_id"))
UNLINK = delete(_WALLETS).where(_WALLETS.c.id == bindparam("id"))
RECEIVING_OF = select(_USERS.c.receiving_wallet_id).where(_USERS.c.id == bindparam("id"))
