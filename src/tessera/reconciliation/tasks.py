"""The reconciliation's jobs: an item following its NFT (``nft.follow``), a product's scheduled
check (``nft.reconcile``), and the chore that queues those checks."""

import uuid
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from tessera.changes.schemas import EventType
from tessera.changes.service import record
from tessera.db import Database
from tessera.jobs.queue import JobKind, enqueue
from tessera.jobs.repository import JobRow
from tessera.jobs.worker import BatchHandler, Chore, JobContext, JobHandler, hold
from tessera.models import JobStatus, NftStatus, ProductItem
from tessera.models.base import utcnow
from tessera.products import item_repository
from tessera.products import repository as products
from tessera.products.item_schemas import ItemOwner, TransferItem, TransferRead
from tessera.products.rows import Item
from tessera.reconciliation import repository
from tessera.reconciliation.service import reconcile, reconcile_subject
from tessera.users.repository import get_user_row
from tessera.users.schemas import UserRef

ACTIVE_WITHIN = timedelta(days=1)


async def follow(context: JobContext, job: JobRow) -> None:
    """The item follows its NFT (the chain is the truth): to the project user holding the
    wallet it sits in (a transfer with ``"source": "chain"``, its change and webhook), or, in a
    wallet no user of the project holds, the item is marked held outside Tessera. Nothing when
    the NFT has moved again since the repair was planned (the next check sees where)."""
    item_id = uuid.UUID(job.payload["product_item_id"])
    owner = bytes.fromhex(job.payload["owner"])
    item = await context.database.read(item_repository.item_row, item_id)
    if item is None:
        return
    project_id, product_id = item.project_id, item.product_id
    product = await context.database.read(products.get_product_row, project_id, product_id)
    collection_id, nft_id = product.nft_collection_id, item.item_id
    if collection_id is None:
        return
    now_on_chain = await context.chains.run(
        str(product.chain), lambda g: g.item_owner(collection_id, nft_id)
    )
    if now_on_chain != owner:
        return
    async with context.database.transaction() as tx:
        await hold(tx, job)
        product = await products.lock_product(tx, project_id, product_id)
        row = await item_repository.lock_item(tx, product, item_id)
        wallets = await repository.wallets_by_key(tx, project_id, [owner])
        now = utcnow()
        if not wallets:
            values: dict[str, Any] = {"nft_status": NftStatus.EXTERNAL, "nft_wallet_id": None}
            values |= {"nft_held_by": owner.hex(), "updated_at": now}
            await products.write_columns(tx, ProductItem, item_id, values)
            await tx.commit()
            return
        wallet = wallets[0]
        values = {"nft_status": NftStatus.MINTED, "nft_wallet_id": wallet.id}
        values |= {"nft_held_by": None, "updated_at": now}
        await products.write_columns(tx, ProductItem, item_id, values)
        if wallet.user_id != row.owner_id:
            sender = await get_user_row(tx, project_id, UserRef("id", row.owner_id))
            recipient = await get_user_row(tx, project_id, UserRef("id", wallet.user_id))
            transferred = row._replace(owner_id=recipient.id, updated_at=now)
            moved_item = Item(transferred, product=product, owner=recipient)
            await item_repository.write_transfer(tx, transferred)
            transferred_at = int(now.timestamp())
            await item_repository.add_transfer(
                tx,
                {
                    "project_id": project_id,
                    "item_id": item_id,
                    "from_user_id": sender.id,
                    "to_user_id": recipient.id,
                    "transferred_at": transferred_at,
                    "source": "chain",
                },
            )
            moved = TransferRead(
                product_item=TransferItem.of(moved_item),
                previous_owner=ItemOwner.model_validate(sender),
                new_owner=ItemOwner.model_validate(recipient),
                transferred_at=transferred_at,
            )
            await record(tx, project_id, EventType.ITEM_TRANSFERRED, [moved])
        await tx.commit()


async def scheduled_check(context: JobContext, job: JobRow) -> None:
    """A product's scheduled reconciliation: recorded like any (drift announced once)."""
    await reconcile(
        context.database,
        context.chains,
        uuid.UUID(job.payload["project_id"]),
        uuid.UUID(job.payload["product_id"]),
    )


async def _nothing_to_show(context: JobContext, jobs: Sequence[JobRow], status: JobStatus) -> None:
    """These jobs show their state on no row of their own."""


HANDLERS: dict[str, JobHandler | BatchHandler] = {
    JobKind.FOLLOW: JobHandler(follow, _nothing_to_show),
    JobKind.RECONCILE: JobHandler(scheduled_check, _nothing_to_show),
}


def reconcile_chore(interval_seconds: int) -> Chore | None:
    """Every ``interval_seconds``: a check queued for each ``mint_nft`` product with NFT activity
    in the last day that no check visited within the interval (and none is queued), so that
    with many workers each product is checked once."""
    if interval_seconds <= 0:
        return None

    async def queue_reconciliations(database: Database) -> int:
        now = utcnow()
        due = await database.read(
            repository.due_checks,
            active_since=now - ACTIVE_WITHIN,
            checked_since=now - timedelta(seconds=interval_seconds),
        )
        queued = 0
        async with database.transaction() as tx:
            for product in due:
                subject = reconcile_subject(product.id)
                if await repository.live_job(tx, product.project_id, JobKind.RECONCILE, subject):
                    continue
                payload = {"project_id": str(product.project_id), "product_id": str(product.id)}
                job = {"project_id": product.project_id, "kind": JobKind.RECONCILE}
                await enqueue(tx, [job | {"subject": subject, "payload": payload}])
                queued += 1
            await tx.commit()
        return queued

    return float(interval_seconds), queue_reconciliations
