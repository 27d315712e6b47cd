import uuid
from typing import Annotated

from fastapi import Body

from tessera.auth.dependencies import ReadAccess, WriteAccess
from tessera.chain.registry import ChainsDep
from tessera.db import DatabaseDep
from tessera.errors import responses
from tessera.reconciliation import service
from tessera.reconciliation.schemas import ReconciliationRead, RepairRead, RepairRequest
from tessera.web.routes import project_router

router = project_router("/products", tags=["reconciliation"])


@router.get(
    "/{id}/reconciliation",
    response_model=ReconciliationRead,
    responses=responses(400, 401, 404, 409, 503),
)
async def get_reconciliation(
    principal: ReadAccess, database: DatabaseDep, chains: ChainsDep, id: uuid.UUID
) -> ReconciliationRead:
    """Compare the product's NFTs with the chain now: its collection, and every item's NFT read
    in pages by storage prefix. Each finding is `missing_on_chain`, `unexpected_on_chain`,
    `owner_mismatch`, `metadata_mismatch`, `collection_mismatch` or `stuck` (a job waiting longer
    than `TESSERA_RECONCILE_STUCK_SECONDS`). The result is recorded as the product's last
    reconciliation; a finding the last one did not have fires `nft.drift_found`. A product
    without `mint_nft` is a 409, a chain that does not answer a 503."""
    checked = await service.reconcile(database, chains, principal.project_id, id, in_request=True)
    return checked.shown


@router.post(
    "/{id}/reconciliation/repair",
    response_model=RepairRead,
    responses=responses(400, 401, 403, 404, 409, 503),
)
async def repair_reconciliation(
    principal: WriteAccess,
    database: DatabaseDep,
    chains: ChainsDep,
    id: uuid.UUID,
    body: Annotated[RepairRequest | None, Body()] = None,
) -> RepairRead:
    """Reconcile, then one action per finding: `mint` or `set_metadata` (the database is the
    ledger of custodial wallets), `transfer_back` (moved between custodial wallets: moved back
    with the custodial key holding it), `follow` (the chain is the truth: the item follows its
    NFT to the project user holding the wallet, a transfer with `"source": "chain"`),
    `mark_external` (held by a wallet no project user holds), `retry` (a stuck job) or `report`
    (`unexpected_on_chain`, `collection_mismatch`: never repaired automatically). A dry run
    (`dry_run`, the default) changes nothing; otherwise each action is queued as a job, and a
    repair called again while they run answers the same jobs and queues nothing new."""
    return await service.repair(
        database,
        chains,
        principal.project_id,
        id,
        dry_run=True if body is None else body.dry_run,
        in_request=True,
    )
