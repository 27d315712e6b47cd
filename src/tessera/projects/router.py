from typing import Annotated

from fastapi import Query

from tessera.auth.dependencies import ReadAccess
from tessera.chain.registry import ChainsDep
from tessera.db import DatabaseDep
from tessera.errors import responses
from tessera.projects import service
from tessera.projects.schemas import ProjectWalletRead, WalletBalancesQuery
from tessera.wallets.schemas import WalletBalance
from tessera.web.routes import project_router

router = project_router("/projects", tags=["projects"])


@router.get("/wallets", response_model=list[ProjectWalletRead], responses=responses(401))
async def fetch_project_wallets(
    principal: ReadAccess, database: DatabaseDep, chains: ChainsDep
) -> list[ProjectWalletRead]:
    """All wallets of the project, with their address on each configured chain."""
    configured = chains.settings.configured_chains()
    wallets = await service.list_wallets(database, principal)
    return [ProjectWalletRead.of(wallet, configured) for wallet in wallets]


@router.get(
    "/wallets/balances",
    response_model=list[WalletBalance],
    responses=responses(400, 401, 409, 503),
)
async def fetch_project_wallet_balances(
    principal: ReadAccess,
    database: DatabaseDep,
    chains: ChainsDep,
    query: Annotated[WalletBalancesQuery, Query()],
) -> list[WalletBalance]:
    """Native balances of the project's wallets on ``chain`` (default: the first configured)."""
    return await service.wallet_balances(database, principal, chains=chains, chain=query.chain)
