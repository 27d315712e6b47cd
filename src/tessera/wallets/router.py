"""Wallets a user holds: linked by signing a challenge; the receiving wallet; unlinking."""

import uuid

from fastapi import Response

from tessera.auth.dependencies import ReadAccess, WriteAccess
from tessera.chain.registry import ChainsDep
from tessera.config import SettingsDep
from tessera.db import DatabaseDep
from tessera.errors import responses
from tessera.users.schemas import BalancesQuery
from tessera.wallets import service
from tessera.wallets.schemas import (
    ReceivingWalletRequest,
    UserWallets,
    WalletBalance,
    WalletChallengeRead,
    WalletChallengeRequest,
    WalletLinkRequest,
)
from tessera.web.routes import concrete_paths_own_their_methods, project_router

router = project_router("/users/wallets", tags=["users"])
concrete_paths_own_their_methods(router, "/challenge", "/receiving")  # not /{wallet_id}


@router.post(
    "/challenge",
    status_code=201,
    response_model=WalletChallengeRead,
    responses=responses(400, 401, 403, 404),
)
async def wallet_challenge(
    principal: WriteAccess, database: DatabaseDep, body: WalletChallengeRequest
) -> WalletChallengeRead:
    """A text for the user to sign with the wallet's key, valid for 5 minutes, answered once."""
    return await service.wallet_challenge(database, principal, body=body)


@router.post(
    "", status_code=201, response_model=UserWallets, responses=responses(400, 401, 403, 404, 409)
)
async def link_wallet(
    principal: WriteAccess, database: DatabaseDep, settings: SettingsDep, body: WalletLinkRequest
) -> UserWallets:
    """Link a wallet the user holds (custody ``user-controlled``), proven by the signature of
    the challenge's message (sr25519 or ed25519, 0x-hex)."""
    return await service.link_wallet(
        database, principal, body=body, ss58_prefix=settings.ss58_prefix
    )


@router.post("/receiving", response_model=UserWallets, responses=responses(400, 401, 403, 404))
async def choose_receiving_wallet(
    principal: WriteAccess, database: DatabaseDep, body: ReceivingWalletRequest
) -> UserWallets:
    """Choose the user's wallet that NFTs are minted to (default: the custodial wallet)."""
    return await service.choose_receiving_wallet(database, principal, body=body)


@router.delete("/{wallet_id}", status_code=204, responses=responses(400, 401, 403, 404, 409))
async def unlink_wallet(
    principal: WriteAccess, database: DatabaseDep, wallet_id: uuid.UUID
) -> Response:
    """Unlink a user-controlled wallet, unless NFTs of the project sit in it."""
    await service.unlink_wallet(database, principal, wallet_id=wallet_id)
    return Response(status_code=204)


# Under /users, as the contract has it, but here: the balances are the wallets'.
balances_router = project_router("/users", tags=["users"])


@balances_router.post(
    "/balances", response_model=list[WalletBalance], responses=responses(400, 401, 404, 409, 503)
)
async def get_wallet_balances(
    principal: ReadAccess, database: DatabaseDep, chains: ChainsDep, body: BalancesQuery
) -> list[WalletBalance]:
    """Native balances of the user's wallets on ``chain`` (default: the first configured)."""
    return await service.user_balances(database, principal, chains=chains, query=body)
