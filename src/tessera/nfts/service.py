"""What the NFT jobs write besides the chain: the NFT state of items and products, the changes
that report it, and the custodial keys that sign."""

import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from tessera.chain.keys import open_seed
from tessera.changes.schemas import EventType
from tessera.changes.service import record
from tessera.db import Transaction, rerun_on_conflict
from tessera.extrinsics.schemas import Signer
from tessera.jobs.queue import JobKind
from tessera.jobs.repository import JobRow
from tessera.jobs.worker import Claim, JobContext, Show, hold
from tessera.models import JobStatus, NftStatus, Product, ProductItem
from tessera.models.base import utcnow
from tessera.nfts import repository
from tessera.nfts.schemas import HeldWallet, SigningWallet
from tessera.products import item_repository
from tessera.products import repository as products
from tessera.products.item_schemas import NftFailure, ProductItemRead
from tessera.products.rows import ProductRow, owned_item
from tessera.products.schemas import ProductRead
from tessera.toolkit.crypto import Sealed, SecretBox


def seed_of(box: SecretBox, wallet: SigningWallet | HeldWallet) -> bytes:
    """A custodial wallet's seed, to sign in the worker; a wallet its user holds has none."""
    if wallet.secret_key_id is None or wallet.secret_blob is None:
        raise RuntimeError(f"wallet {wallet.address} is held by its user: Tessera cannot sign")
    return open_seed(
        box, public_key=wallet.public_key, secret=Sealed(wallet.secret_key_id, wallet.secret_blob)
    )


def signer_of(
    context: JobContext, project_id: uuid.UUID, chain: str, wallet: SigningWallet | HeldWallet
) -> Signer:
    return Signer(project_id, chain, wallet.public_key, seed_of(context.box, wallet))


def item_id_of(job: JobRow) -> uuid.UUID:
    return uuid.UUID(job.payload["product_item_id"])


async def shown_items(
    tx: Transaction, product: ProductRow, ids: Sequence[uuid.UUID]
) -> list[ProductItemRead]:
    """The product's items as the API shows them now."""
    return [
        ProductItemRead.of(owned_item(row, product))
        for row in await repository.shown_items(tx, ids)
    ]


async def record_items(
    tx: Transaction, product: ProductRow, event: EventType, ids: Sequence[uuid.UUID]
) -> None:
    """The change ``event`` for each of the product's items, as the API shows them now."""
    await record(tx, product.project_id, event, await shown_items(tx, product, ids))


def show_items(kind: JobKind) -> Show:
    """Items whose mint (or transfer) job gives up show failed, with an ``nft.failed`` change
    (with the job's last error); those retried show queued again."""
    column = "nft_transfer" if kind == JobKind.TRANSFER else "nft"

    @rerun_on_conflict
    async def show(context: JobContext, jobs: Sequence[JobRow], status: JobStatus) -> None:
        ids = [item_id_of(job) for job in jobs]
        now = utcnow()
        async with context.database.transaction() as tx:
            if status != JobStatus.FAILED:
                values: dict[str, Any] = {f"{column}_status": NftStatus.QUEUED, "updated_at": now}
                await repository.write_items(tx, [{"id": i, **values} for i in ids])
                await tx.commit()
                return
            errors = {job.id: await products.job_error(tx, job.id) or "" for job in jobs}
            failed = {f"{column}_status": NftStatus.FAILED, "updated_at": now}
            await repository.write_items(
                tx,
                [
                    {"id": item_id_of(job), **failed, f"{column}_reason": errors[job.id][:500]}
                    for job in jobs
                ],
            )
            for job in jobs:
                item = await item_repository.item_row(tx, item_id_of(job))
                if item is None:
                    continue
                product = await products.get_product_row(tx, item.project_id, item.product_id)
                [shown] = await shown_items(tx, product, [item.id])
                failure = NftFailure(job=kind.value, error=errors[job.id], product_item=shown)
                await record(tx, item.project_id, EventType.NFT_FAILED, [failure])
            await tx.commit()

    return show


@rerun_on_conflict
async def show_products(context: JobContext, jobs: Sequence[JobRow], status: JobStatus) -> None:
    """A product whose collection job gives up shows failed, with an ``nft.failed`` change;
    one retried shows queued again."""
    now = utcnow()
    for job in jobs:
        product_id = uuid.UUID(job.payload["product_id"])
        async with context.database.transaction() as tx:
            if status != JobStatus.FAILED:
                values = {"nft_status": NftStatus.QUEUED, "updated_at": now}
                await products.write_columns(tx, Product, product_id, values)
                await tx.commit()
                continue
            values = {"nft_status": NftStatus.FAILED, "updated_at": now}
            await products.write_columns(tx, Product, product_id, values)
            project_id = await products.project_of_product(tx, product_id)
            shown = await products.read_product(tx, project_id, product_id)
            if shown is not None:
                error = await products.job_error(tx, job.id) or ""
                failure = NftFailure(
                    job=JobKind.CREATE_COLLECTION.value,
                    error=error,
                    product=ProductRead.model_validate(shown),
                )
                await record(tx, project_id, EventType.NFT_FAILED, [failure])
            await tx.commit()


@rerun_on_conflict
async def fail_alone(
    context: JobContext, held: Claim, failed: Mapping[uuid.UUID, str], *, transfer: bool
) -> None:
    """Those items' mints (or transfers) failed alone, with the pallet's error: queued again
    with it as their reason, to be signed anew (their jobs are retried after a backoff)."""
    if not failed:
        return
    column, now = ("nft_transfer" if transfer else "nft"), utcnow()
    async with context.database.transaction() as tx:
        await hold(tx, held)
        await repository.write_items(
            tx,
            [
                {
                    "id": item_id,
                    f"{column}_status": NftStatus.QUEUED,
                    f"{column}_extrinsic_id": None,
                    f"{column}_reason": error[:500],
                    "updated_at": now,
                }
                for item_id, error in failed.items()
            ],
        )
        await tx.commit()


async def write_item(tx: Transaction, item_id: uuid.UUID, values: dict[str, Any]) -> None:
    await products.write_columns(tx, ProductItem, item_id, values | {"updated_at": utcnow()})
