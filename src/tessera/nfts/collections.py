"""A product's NFT collection, created by the project wallet (docs/chain.md).

The chain does not make creation idempotent, so the creation is recorded in the ledger
(``products.nft_extrinsic_id``) before it is submitted, and a retry follows what it recorded.
Without a live recorded creation, the project wallet's collections are read first: one that no
product records, with the same max supply, is the one a run created and could not record (the
ledger came after it), and is adopted. Collection creation runs one at a time per project and
chain (the job subject), so nothing else can own such an orphan.
"""

import uuid

from tessera.chain.gateway import ChainError, ChainGateway, CreateCollection, Part
from tessera.changes.schemas import EventType
from tessera.changes.service import record
from tessera.db import Transaction
from tessera.errors import ProductNotFound
from tessera.extrinsics import repository as ledger
from tessera.extrinsics.repository import ExtrinsicRow
from tessera.extrinsics.schemas import Gone, Landed, Signer
from tessera.extrinsics.service import follow, signing
from tessera.jobs.queue import NotReady
from tessera.jobs.repository import JobRow
from tessera.jobs.worker import JobContext, hold
from tessera.models import LIVE, NftStatus, Product
from tessera.models.base import utcnow
from tessera.nfts import repository
from tessera.nfts.service import signer_of
from tessera.products import repository as products
from tessera.products.rows import ProductRow
from tessera.products.schemas import ProductRead

FUNDS_DELAY = 10.0


async def create_collection(context: JobContext, job: JobRow) -> None:
    product_id = uuid.UUID(job.payload["product_id"])
    try:
        product = await context.database.read(products.get_product_row, job.project_id, product_id)
    except ProductNotFound:
        return  # deleted with its unused event
    if product.nft_collection_id is not None or product.chain is None:
        return
    wallet = await context.database.read(repository.project_wallet, product.project_id)
    signer = signer_of(context, product.project_id, product.chain, wallet)
    parts: list[Part] = [CreateCollection(wallet.public_key, product.max_items)]
    recorded = None
    if product.nft_extrinsic_id is not None:
        found = await context.database.read(ledger.extrinsics, [product.nft_extrinsic_id])
        recorded = found.get(product.nft_extrinsic_id)
    if recorded is None or recorded.status not in LIVE:
        orphan = await _orphan(context, product, signer)
        if orphan is not None:
            await _created(context, job, product, orphan, None)
            return
        recorded = await _sign(context, job, product, signer, parts)
    result = await follow(context, signer, recorded, parts, held=job)
    if isinstance(result, Gone):
        raise NotReady(f"the collection's creation: {result.reason}", delay=0)
    [fate] = result.outcome.parts
    if fate.error is not None or fate.collection_id is None:
        async with context.database.transaction() as tx:
            await hold(tx, job)
            await ledger.mark_final(tx, recorded.id, result.block, result.outcome.fee, utcnow())
            await tx.commit()
        raise ChainError(f"Nfts.create: {fate.error or 'no collection created'}")
    await _created(context, job, product, fate.collection_id, result)


async def _orphan(context: JobContext, product: ProductRow, signer: Signer) -> int | None:
    """A collection of the project wallet that no product records, of the product's max
    supply: created by a run that could not record it."""
    assert product.chain is not None
    recorded = await context.database.read(
        repository.recorded_collections, product.project_id, product.chain
    )

    def find(gateway: ChainGateway) -> int | None:
        for collection_id in gateway.collections_owned_by(signer.public_key):
            if collection_id in recorded:
                continue
            found = gateway.collection(collection_id)
            if found is not None and found.max_supply == product.max_items:
                return collection_id
        return None

    return await context.chains.run(product.chain, find)


async def _sign(
    context: JobContext, job: JobRow, product: ProductRow, signer: Signer, parts: list[Part]
) -> ExtrinsicRow:
    def price(gateway: ChainGateway) -> int:
        return gateway.weigh(signer.public_key, parts).fee + gateway.deposits().collection

    async with signing(context, signer) as slot:
        cost = await context.chains.run(signer.chain, price)
        if cost > slot.available:
            raise NotReady(slot.short_of_funds("creating the collection", cost), delay=FUNDS_DELAY)

        async def link(tx: Transaction, row: ExtrinsicRow) -> None:
            values = {"nft_status": NftStatus.SUBMITTED, "nft_extrinsic_id": row.id}
            await products.write_columns(tx, Product, product.id, values | {"updated_at": utcnow()})

        return await slot.sign(parts, cost=cost, held=job, link=link)


async def _created(
    context: JobContext,
    job: JobRow,
    product: ProductRow,
    collection_id: int,
    landed: Landed | None,
) -> None:
    """The product's collection is ``collection_id``: recorded, with the change that reports it
    (``nft.collection_created``)."""
    now = utcnow()
    async with context.database.transaction() as tx:
        await hold(tx, job)
        if landed is not None:
            await ledger.mark_final(tx, landed.extrinsic.id, landed.block, landed.outcome.fee, now)
        values = {
            "nft_status": NftStatus.CREATED,
            "nft_collection_id": collection_id,
            "updated_at": now,
        }
        await products.write_columns(tx, Product, product.id, values)
        shown = await products.read_product(tx, product.project_id, product.id)
        assert shown is not None  # just written
        await record(
            tx,
            product.project_id,
            EventType.NFT_COLLECTION_CREATED,
            [ProductRead.model_validate(shown)],
        )
        await tx.commit()
