"""Reconcile a product's NFTs with the chain, and repair what drifted (docs/chain.md,
Reconciliation).

A check reads the database first and the chain after (a job that lands in between shows as
drift until the next check, never the other way round), compares them (``findings``), and
records the result as the product's last reconciliation: a finding that the last one did not
have is announced once, as an ``nft.drift_found`` change (and webhook).
"""

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta

from tessera.chain.gateway import PAGE_SIZE, ChainGateway, ChainItem, Collection
from tessera.chain.keys import CUSTODIAL, ss58_address
from tessera.chain.registry import Chains
from tessera.changes.schemas import EventType
from tessera.changes.service import record
from tessera.db import Database, Rows, Transaction, rerun_on_conflict
from tessera.errors import NftsNotMinted
from tessera.jobs.queue import JobKind, enqueue
from tessera.models import JobStatus, NftStatus, Product, ProductItem
from tessera.models.base import utcnow
from tessera.products import repository as products
from tessera.products.nft_jobs import ItemRef, item_subject, queue_nft
from tessera.products.rows import ProductRow
from tessera.reconciliation import findings as f
from tessera.reconciliation import repository
from tessera.reconciliation.schemas import (
    FindingRead,
    ReconciliationRead,
    RepairActionRead,
    RepairRead,
)


@dataclass(frozen=True, slots=True)
class Checked:
    """A reconciliation as answered, with what its repair needs."""

    shown: ReconciliationRead
    product: ProductRow
    findings: list[f.Finding]
    items: dict[uuid.UUID, f.ItemState]
    wallets: dict[bytes, f.Wallet]


def reconcile_subject(product_id: uuid.UUID) -> str:
    return f"reconcile:{product_id}"


async def reconcile(
    database: Database,
    chains: Chains,
    project_id: uuid.UUID,
    product_id: uuid.UUID,
    *,
    in_request: bool = False,
) -> Checked:
    """Compare the product's NFTs with the chain and record the result (a product without
    ``mint_nft``: 409; an unreachable chain: 503)."""
    product, wallet_key, rows = await database.read(_database_side, project_id, product_id)
    chain = str(product.chain)
    collection_id = product.nft_collection_id

    def read(gateway: ChainGateway) -> tuple[Collection | None, dict[int, ChainItem]]:
        if collection_id is None:
            return None, {}
        return gateway.collection(collection_id), gateway.collection_items(collection_id)

    # A long read: a product's whole collection, a page of 1,000 NFTs (and one of their
    # metadata) per round trip, for the items the database has and as many more.
    pages = 2 * (len(rows) // PAGE_SIZE + 1)
    collection, nfts = await chains.run(chain, read, in_request=in_request, pages=pages)
    keys = [nft.owner for nft in nfts.values()] + [
        r.nft_wallet_key for r in rows if r.nft_wallet_key
    ]
    found = await database.read(repository.wallets_by_key, project_id, keys)
    wallets = {
        row.public_key: f.Wallet(row.id, row.user_id, row.custody == CUSTODIAL) for row in found
    }
    items = {
        row.id: f.ItemState(
            id=row.id,
            item_id=row.item_id,
            owner_id=row.owner_id,
            nft_status=row.nft_status,
            nft_transfer_status=row.nft_transfer_status,
            nft_wallet_key=row.nft_wallet_key,
            nft_held_by=row.nft_held_by,
            updated_at=row.updated_at,
        )
        for row in rows
    }
    prefix = chains.config(chain).ss58_prefix
    now = utcnow()
    state = f.ProductState(
        collection_id=collection_id,
        nft_status=product.nft_status,
        metadata_uri=product.metadata_uri,
        max_items=product.max_items,
        wallet_key=wallet_key,
        updated_at=product.updated_at,
    )
    stuck_after = timedelta(seconds=chains.settings.reconcile_stuck_seconds)
    found_now = f.compare(
        state,
        collection,
        list(items.values()),
        nfts,
        wallets,
        now=now,
        stuck_after=stuck_after,
        address=lambda key: ss58_address(key, prefix),
    )
    shown = ReconciliationRead(
        product_id=product.id,
        chain=chain,
        collection_id=collection_id,
        checked_at=now,
        items_checked=len(items),
        findings=[FindingRead.model_validate(finding.shown()) for finding in found_now],
    )
    async with database.transaction() as tx:
        await _record(tx, project_id, shown)
        await tx.commit()
    return Checked(shown, product, found_now, items, wallets)


async def _database_side(
    rows: Rows, project_id: uuid.UUID, product_id: uuid.UUID
) -> tuple[ProductRow, bytes, list[repository.ItemNft]]:
    product = await products.get_product_row(rows, project_id, product_id)
    if not product.mint_nft:
        raise NftsNotMinted("this product does not mint NFTs: there is nothing to reconcile")
    wallet_key = await repository.project_wallet_key(rows, project_id)
    if wallet_key is None:
        raise RuntimeError(f"project {project_id} has no project wallet")
    return product, wallet_key, await repository.item_nfts(rows, product_id)


def _key(finding: dict[str, object]) -> tuple[object, object]:
    return finding["kind"], finding["item_id"]


async def _record(tx: Transaction, project_id: uuid.UUID, shown: ReconciliationRead) -> None:
    """``shown`` becomes the product's last reconciliation; an ``nft.drift_found`` change when
    it has a finding the last one did not. The product's row is locked: checks of one product
    record one after the other."""
    await products.lock_product(tx, project_id, shown.product_id)
    last = await repository.last_check(tx, shown.product_id)
    findings = [finding.model_dump(mode="json") for finding in shown.findings]
    known = {_key(finding) for finding in last.findings} if last else set()
    await repository.write_check(
        tx,
        repository.LastCheck(
            product_id=shown.product_id,
            project_id=project_id,
            checked_at=shown.checked_at,
            items_checked=shown.items_checked,
            findings=findings,
        ),
    )
    if any(_key(finding) not in known for finding in findings):
        await record(tx, project_id, EventType.NFT_DRIFT_FOUND, [shown])


async def last_reconciliation(
    rows: Rows, project_id: uuid.UUID, product_id: uuid.UUID
) -> ReconciliationRead | None:
    """The product's last recorded reconciliation (the console, the CLI), or None."""
    product = await products.get_product_row(rows, project_id, product_id)
    last = await repository.last_check(rows, product_id)
    if last is None:
        return None
    return ReconciliationRead(
        product_id=product_id,
        chain=str(product.chain),
        collection_id=product.nft_collection_id,
        checked_at=last.checked_at,
        items_checked=last.items_checked,
        findings=[FindingRead.model_validate(finding) for finding in last.findings],
    )


@rerun_on_conflict
async def repair(
    database: Database,
    chains: Chains,
    project_id: uuid.UUID,
    product_id: uuid.UUID,
    *,
    dry_run: bool,
    in_request: bool = False,
) -> RepairRead:
    """Reconcile, then the action each finding calls for (``findings.plan``): answered only in
    a dry run, queued as jobs otherwise. A job already queued or running for an action (a repair
    called again while the last one runs) is answered instead of a new one."""
    checked = await reconcile(database, chains, project_id, product_id, in_request=in_request)
    planned = [
        f.Planned(
            finding,
            f.plan(
                finding, checked.items.get(finding.item) if finding.item else None, checked.wallets
            ),
        )
        for finding in checked.findings
    ]
    job_ids: list[uuid.UUID | None] = [None] * len(planned)
    if not dry_run:
        async with database.transaction() as tx:
            for index, step in enumerate(planned):
                job_ids[index] = await _queue(tx, checked, step)
            await tx.commit()
    return RepairRead(
        product_id=product_id,
        dry_run=dry_run,
        checked_at=checked.shown.checked_at,
        actions=[
            RepairActionRead(
                kind=step.finding.kind,
                item_id=step.finding.item_id,
                action=step.action,
                job_id=job_id,
                finding=FindingRead.model_validate(step.finding.shown()),
            )
            for step, job_id in zip(planned, job_ids, strict=True)
        ],
    )


_JOB_OF_ACTION = {
    f.Action.MINT: JobKind.MINT,
    f.Action.SET_METADATA: JobKind.MINT,
    f.Action.TRANSFER_BACK: JobKind.TRANSFER,
    f.Action.FOLLOW: JobKind.FOLLOW,
    f.Action.MARK_EXTERNAL: JobKind.FOLLOW,
}


async def _queue(tx: Transaction, checked: Checked, step: f.Planned) -> uuid.UUID | None:
    """The job that carries ``step`` out: queued now, or the live one already queued. The
    item's NFT state is left as it is (a repair is not a new mint or transfer): the drift stays
    visible until the job has put it right, and a repair called meanwhile finds the same
    finding and answers the same job."""
    product, finding = checked.product, step.finding
    if step.action == f.Action.REPORT:
        return None
    if step.action == f.Action.RETRY:
        return await _retry(tx, product, finding)
    assert finding.item is not None  # every other action is about an item
    kind = _JOB_OF_ACTION[step.action]
    live = await repository.live_job(tx, product.project_id, kind, item_subject(finding.item))
    if live is not None:
        return live.id
    item = ItemRef(finding.item, product.project_id, product.id)
    if kind == JobKind.FOLLOW:
        assert finding.chain_owner is not None  # an owner_mismatch
        job = {
            "project_id": product.project_id,
            "kind": JobKind.FOLLOW,
            "subject": item_subject(item.id),
            "payload": {"product_item_id": str(item.id), "owner": finding.chain_owner.hex()},
        }
        return (await enqueue(tx, [job]))[0].id
    return (await queue_nft(tx, kind, [item]))[0].id


async def _retry(tx: Transaction, product: ProductRow, finding: f.Finding) -> uuid.UUID:
    """A stuck row's job runs again: a failed one with fresh attempts, a queued one at once,
    a running one is left to its worker; a row whose job is gone gets a new one."""
    now = utcnow()
    if finding.item is None:
        subject = f"collections:{product.project_id}:{product.chain}"
        kinds: Sequence[JobKind] = (JobKind.CREATE_COLLECTION,)
        model: type[Product] | type[ProductItem] = Product
        row_id, column = product.id, "nft_status"
    else:
        subject = item_subject(finding.item)
        transfer = finding.database is not None and "transfer_status" in finding.database
        kinds = (JobKind.TRANSFER,) if transfer else (JobKind.MINT,)
        model, row_id = ProductItem, finding.item
        column = "nft_transfer_status" if transfer else "nft_status"
    job = await repository.latest_job(tx, product.project_id, subject, kinds, row_id)
    if job is not None and job.status == JobStatus.RUNNING:
        return job.id
    await products.write_columns(tx, model, row_id, {column: NftStatus.QUEUED, "updated_at": now})
    if job is not None and await repository.requeue(tx, job.id, now):
        return job.id
    if job is not None and job.status == JobStatus.QUEUED:
        await repository.make_due(tx, job.id, now)
        return job.id
    rows = [product] if model is Product else [ItemRef(row_id, product.project_id, product.id)]
    return (await queue_nft(tx, kinds[0], rows))[0].id
