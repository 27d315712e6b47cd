"""Native balances of wallets (a user's or the project's), read from a configured chain."""

import secrets
import time
import uuid
from collections.abc import Sequence
from typing import Protocol

from sqlalchemy.exc import IntegrityError

from tessera.auth.principal import Principal
from tessera.chain.gateway import ChainGateway
from tessera.chain.keys import (
    USER_CONTROLLED,
    WALLET_TYPE,
    public_key_of,
    signed_by,
    ss58_address,
)
from tessera.chain.registry import Chains
from tessera.config import CHAINS, Chain
from tessera.db import Database, rerun_on_conflict
from tessera.errors import ChallengeUnusable, WalletInUse, WalletNotFound, WalletTaken
from tessera.models.base import utcnow
from tessera.users.repository import get_user_row
from tessera.users.schemas import BalancesQuery
from tessera.wallets import repository
from tessera.wallets.schemas import (
    AssetBalance,
    ReceivingWalletRequest,
    UserWallets,
    WalletBalance,
    WalletChallengeRead,
    WalletChallengeRequest,
    WalletLinkRequest,
)


class KeyedWallet(Protocol):
    """A wallet as ``read_balances`` reads it (a user's or the project's)."""

    @property
    def type(self) -> str: ...

    @property
    def public_key(self) -> bytes: ...


async def user_balances(
    database: Database, principal: Principal, *, chains: Chains, query: BalancesQuery
) -> list[WalletBalance]:
    """Native balances of the user's wallets on ``chain`` (default: the first configured)."""
    wallets = await database.read(repository.read_wallets_of, principal.project_id, query.ref())
    return await read_balances(chains, query.chain, wallets)


async def read_balances(
    chains: Chains, chain_name: Chain | None, wallets: Sequence[KeyedWallet]
) -> list[WalletBalance]:
    """One entry per wallet on ``chain_name`` (default: the first configured chain): its free
    native balance and the part of it that is frozen. 409 for a chain without an RPC URL, 503
    when the chain does not answer in time."""
    chain = chains.config(chain_name or _default_chain(chains))
    keys = [w.public_key for w in wallets]

    def read(gateway: ChainGateway) -> list[tuple[int, int]]:
        return [(b.free, b.frozen) for b in map(gateway.balance, keys)]

    balances = await chains.run(chain.name, read, in_request=True)
    now = int(time.time())
    return [
        WalletBalance(
            address=ss58_address(wallet.public_key, chain.ss58_prefix),
            type=wallet.type,
            code=200,
            message="OK",
            generated_at=now,
            data=[
                AssetBalance(
                    asset_id="native",
                    balance=str(free),
                    name=chain.name,
                    symbol=chain.symbol,
                    decimals=chain.decimals,
                    lock=str(frozen),
                )
            ],
        )
        for wallet, (free, frozen) in zip(wallets, balances, strict=True)
    ]


def _default_chain(chains: Chains) -> Chain:
    configured = chains.settings.configured_chains()
    return configured[0].name if configured else CHAINS[0]


# Wallets the users hold: a challenge to sign, the link, the receiving wallet, the unlink.

CHALLENGE_SECONDS = 300


@rerun_on_conflict
async def wallet_challenge(
    database: Database, principal: Principal, *, body: WalletChallengeRequest
) -> WalletChallengeRead:
    """A short-lived text for the user to sign with the key of ``address``."""
    expires_at = int(time.time()) + CHALLENGE_SECONDS
    async with database.transaction() as tx:
        user = await get_user_row(tx, principal.project_id, body.ref())
        message = (
            f"Link the wallet {body.address} to user {user.id} on Tessera. "
            f"Nonce {secrets.token_hex(16)}. Valid until {expires_at}."
        )
        values = {
            "project_id": principal.project_id,
            "user_id": user.id,
            "public_key": public_key_of(body.address),
            "message": message,
            "expires_at": expires_at,
        }
        await repository.add_challenge(tx, values)
        await tx.commit()
    return WalletChallengeRead(message=message, expires_at=expires_at)


@rerun_on_conflict
async def link_wallet(
    database: Database, principal: Principal, *, body: WalletLinkRequest, ss58_prefix: int
) -> UserWallets:
    """Link a wallet the user holds, proven by the signature of the latest challenge for it
    (answered once, before it expires): custody ``user-controlled``. 409 for a signature that
    does not sign the challenge, a missing, used or expired challenge, or an address already
    linked in the project (a malformed address or signature is 400); nothing is linked then. A
    wrong signature leaves the challenge usable (a retry with the right key works)."""
    public_key = public_key_of(body.address)
    now = utcnow()
    async with database.transaction() as tx:
        user = await get_user_row(tx, principal.project_id, body.ref())
        challenge = await repository.latest_challenge(tx, user.id, public_key)
        if challenge is None:
            raise ChallengeUnusable(
                "no challenge for this address: ask POST /v1/users/wallets/challenge first"
            )
        if challenge.used_at is not None:
            raise ChallengeUnusable("this challenge was answered already: ask a new one")
        if challenge.expires_at <= int(now.timestamp()):
            raise ChallengeUnusable("this challenge has expired: ask a new one")
        if not signed_by(public_key, challenge.message.encode(), body.signature_bytes()):
            raise ChallengeUnusable("signature: not a signature of the challenge by this address")
        if await repository.key_is_linked(tx, principal.project_id, public_key):
            raise WalletTaken
        if not await repository.use_challenge(tx, challenge.id, now):
            raise ChallengeUnusable("this challenge was answered already: ask a new one")
        wallet = {
            "user_id": user.id,
            "project_id": principal.project_id,
            "type": WALLET_TYPE,
            "custody": USER_CONTROLLED,
            "public_key": public_key,
            "address": ss58_address(public_key, ss58_prefix),
            "created_at": now,
        }
        try:
            await repository.link(tx, wallet)
        except IntegrityError as exc:  # linked meanwhile by another request
            raise WalletTaken from exc
        await tx.commit()
    return await _user_wallets(database, principal, user.id)


@rerun_on_conflict
async def choose_receiving_wallet(
    database: Database, principal: Principal, *, body: ReceivingWalletRequest
) -> UserWallets:
    """The user's wallet that NFTs are minted to from now on (404 for another's wallet)."""
    async with database.transaction() as tx:
        user = await get_user_row(tx, principal.project_id, body.ref())
        wallet = await repository.read_wallet(tx, principal.project_id, body.wallet_id)
        if wallet is None or wallet.user_id != user.id:
            raise WalletNotFound
        await repository.choose_receiving(tx, user.id, wallet.id, utcnow())
        await tx.commit()
    return await _user_wallets(database, principal, user.id)


@rerun_on_conflict
async def unlink_wallet(database: Database, principal: Principal, *, wallet_id: uuid.UUID) -> None:
    """Unlink a user-controlled wallet, unless NFTs of the project sit in it (409); custodial
    wallets stay (409). Mints then go to the first custodial wallet again."""
    async with database.transaction() as tx:
        wallet = await repository.read_wallet(tx, principal.project_id, wallet_id)
        if wallet is None:
            raise WalletNotFound
        if wallet.custody != USER_CONTROLLED:
            raise WalletInUse("a custodial wallet cannot be unlinked")
        if held := await repository.count_nfts_in(tx, wallet.id):
            raise WalletInUse(
                f"{held} NFTs of this project sit in {wallet.address}: it stays linked"
            )
        await repository.unlink(tx, wallet.id, utcnow())
        await tx.commit()


async def _user_wallets(
    database: Database, principal: Principal, user_id: uuid.UUID
) -> UserWallets:
    found = await database.read(repository.read_user_wallets, principal.project_id, user_id)
    assert found is not None  # the user was just found
    return UserWallets.model_validate(found)
