"""A product's NFTs minted in batches (docs/chain.md).

The worker claims a product's due mints together (batch key ``mint:<product id>``), as many as
one extrinsic carries (``capacity``), and this handler:

1. follows, never signs anew, the extrinsics that already carry some of them (a run that died,
   a block dropped before it was final): their bytes are recorded, and land at most once;
2. reads the others on the chain's last final block: an NFT there with its metadata is recorded
   as it is (minted to the wallet that holds it), one without its metadata gets the metadata
   alone, the rest are minted, each with its metadata, to its holder's receiving wallet;
3. checks the project wallet can pay the deposits and the fee of the whole extrinsic (less what
   its extrinsics in flight will cost), signs as many as it can pay for, and records the
   extrinsic before it is submitted; the others wait, with the reason on the item
   (``nft.reason``) and the job, and go on by themselves once the wallet is funded;
4. follows the extrinsic to its final block, and records each NFT's fate from the events: minted
   (``nft.minted``, with the block), or failed alone with the pallet's error and retried.
"""

import asyncio
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tessera.chain.extrinsics import parts_of
from tessera.chain.gateway import ChainGateway, ChainItem, Mint, Part
from tessera.changes.schemas import EventType
from tessera.db import Transaction
from tessera.extrinsics import repository as ledger
from tessera.extrinsics.fees import costs
from tessera.extrinsics.repository import ExtrinsicRow
from tessera.extrinsics.schemas import Gone, Landed, Signer
from tessera.extrinsics.service import follow, signing
from tessera.instruments import counts
from tessera.instruments.counts import MINT_SECONDS
from tessera.jobs.repository import JobRow
from tessera.jobs.worker import Claim, Done, Failed, JobContext, JobOutcome, Wait, hold
from tessera.models import LIVE, NftStatus
from tessera.models.base import utcnow
from tessera.nfts import repository
from tessera.nfts.schemas import JobItem
from tessera.nfts.service import fail_alone, item_id_of, record_items, signer_of
from tessera.products import item_repository
from tessera.products import repository as products
from tessera.products.rows import ProductRow

# Seconds before jobs look again: for their collection; for funds (each look reads the chain).
COLLECTION_DELAY = 2.0
FUNDS_DELAY = 10.0
NO_ADDRESS = bytes(32)  # the owner of the NFT a batch is weighed with


def _shape(product: ProductRow) -> Mint:
    return Mint(0, 0, NO_ADDRESS, product.metadata_uri)


async def _product_of(context: JobContext, job: JobRow) -> ProductRow:
    product_id = job.payload.get("product_id")
    if product_id is None:  # a job queued before batches: its item says
        item = await context.database.read(item_repository.item_row, item_id_of(job))
        if item is None:
            raise LookupError("the item is gone")
        return await context.database.read(
            products.get_product_row, item.project_id, item.product_id
        )
    project_id = job.project_id
    return await context.database.read(products.get_product_row, project_id, uuid.UUID(product_id))


async def capacity(context: JobContext, job: JobRow) -> int:
    """How many of the product's NFTs, each with its metadata, one extrinsic carries."""
    product = await _product_of(context, job)
    if product.chain is None:
        return 1
    wallet = await context.database.read(repository.project_wallet, product.project_id)
    return (await costs(context, product.chain, wallet.public_key, _shape(product))).capacity


@dataclass(slots=True)
class _Batch:
    """The claim's items of one product, and what becomes of each job."""

    context: JobContext
    claim: Claim
    product: ProductRow
    signer: Signer
    jobs: dict[uuid.UUID, JobRow]  # by item id
    items: dict[uuid.UUID, JobItem]
    outcomes: dict[uuid.UUID, JobOutcome]  # by job id

    def done(self, item_ids: Sequence[uuid.UUID], outcome: JobOutcome) -> None:
        for item_id in item_ids:
            self.outcomes[self.jobs[item_id].id] = outcome


async def mint(context: JobContext, claim: Claim) -> Mapping[uuid.UUID, JobOutcome]:
    outcomes: dict[uuid.UUID, JobOutcome] = {}
    jobs = {item_id_of(job): job for job in claim.jobs}
    items = await context.database.read(repository.job_items, list(jobs))
    for item_id, job in jobs.items():
        if item_id not in items:
            outcomes[job.id] = Done()  # gone with its unused product
        elif items[item_id].wallet_key is None:
            outcomes[job.id] = Failed(f"user {items[item_id].owner_id} has no wallet")
    present = [item for item in items.values() if item.wallet_key is not None]
    if not present:
        return outcomes
    product = await context.database.read(
        products.get_product_row, present[0].project_id, present[0].product_id
    )
    for item in present:
        if item.product_id != product.id:  # not of this batch's product: claimed again at once
            outcomes[jobs[item.id].id] = Wait("another product's batch", 0)
    present = [item for item in present if item.product_id == product.id]
    if product.nft_collection_id is None or product.chain is None:
        outcome: JobOutcome = (
            Failed("the product's NFT collection could not be created")
            if product.nft_status == NftStatus.FAILED
            else Wait("the product's NFT collection is not created yet", COLLECTION_DELAY)
        )
        return outcomes | {jobs[item.id].id: outcome for item in present}
    wallet = await context.database.read(repository.project_wallet, product.project_id)
    batch = _Batch(
        context,
        claim,
        product,
        signer_of(context, product.project_id, product.chain, wallet),
        {item.id: jobs[item.id] for item in present},
        {item.id: item for item in present},
        outcomes,
    )
    await _run(batch)
    return batch.outcomes


async def _run(batch: _Batch) -> None:
    context = batch.context
    carried = [item.nft_extrinsic_id for item in batch.items.values() if item.nft_extrinsic_id]
    recorded = await context.database.read(ledger.extrinsics, carried)
    live = {row.id: row for row in recorded.values() if row.status in LIVE}
    fresh = [item for item in batch.items.values() if item.nft_extrinsic_id not in live]
    followed = [
        _Followed(
            row,
            parts_of(row.body),
            [item for item in batch.items.values() if item.nft_extrinsic_id == row.id],
        )
        for row in live.values()
    ]
    if fresh:
        followed += await _sign(batch, sorted(fresh, key=lambda item: item.item_id))
    results = await asyncio.gather(
        *(follow(context, batch.signer, f.row, f.parts, held=batch.claim) for f in followed)
    )
    for followed_one, result in zip(followed, results, strict=True):
        await _record(batch, followed_one, result)


@dataclass(frozen=True, slots=True)
class _Followed:
    """An extrinsic followed, its parts as signed, and the claim's items it carries."""

    row: ExtrinsicRow
    parts: list[Part]
    items: list[JobItem]


async def _sign(batch: _Batch, fresh: Sequence[JobItem]) -> list[_Followed]:
    """Sign the fresh items' mints (those the wallet can pay for); the extrinsic signed."""
    context, product, signer = batch.context, batch.product, batch.signer
    collection_id, metadata = product.nft_collection_id, product.metadata_uri
    assert collection_id is not None and product.chain is not None  # checked by the caller
    chain = product.chain

    def read(gateway: ChainGateway) -> tuple[dict[int, ChainItem], int, int]:
        found = gateway.items(collection_id, [item.item_id for item in fresh], final=True)
        meta = gateway.metadata_deposit(metadata) if metadata else 0
        return found, gateway.deposits().item, meta

    on_chain, item_deposit, metadata_deposit = await context.chains.run(chain, read)
    there = [item for item in fresh if _complete(on_chain.get(item.item_id), metadata)]
    await _record_found(batch, there, on_chain)
    parts: list[Part] = []
    carried: list[JobItem] = []
    for item in fresh:
        found = on_chain.get(item.item_id)
        if found is None:
            parts.append(Mint(collection_id, item.item_id, item.wallet_key, metadata))
        elif not _complete(found, metadata):
            parts.append(Mint(collection_id, item.item_id, None, metadata))
        else:
            continue
        carried.append(item)
    if not parts:
        return []

    def deposit(part: Part) -> int:
        assert isinstance(part, Mint)
        return (item_deposit if part.owner else 0) + (metadata_deposit if part.metadata else 0)

    estimate = await costs(context, chain, signer.public_key, _shape(product))
    config = context.chains.config(chain)
    async with signing(context, signer) as slot:
        count = len(parts)
        per_deposit = max((deposit(part) for part in parts), default=0)
        per_part = per_deposit + estimate.fee_per_part
        if estimate.fee_base + count * per_part > slot.available:
            count = max(0, (slot.available - estimate.fee_base) // max(per_part, 1))
        fee, needed = 0, 0
        while count > 0:
            fee = await _fee(context, signer, parts[:count])
            needed = fee + sum(deposit(part) for part in parts[:count])
            if needed <= slot.available:
                break
            count -= max(1, count // 50)
        waiting = carried[count:]
        reason = None
        if waiting:
            all_needed = estimate.fee_base + len(parts) * per_part
            reason = slot.short_of_funds(
                f"minting {len(parts)} NFTs (deposits of {config.amount(per_deposit)} and a fee "
                f"of about {config.amount(estimate.fee_per_part)} each)",
                all_needed,
            )
        signed_items = carried[:count]
        now = utcnow()

        async def link(tx: Transaction, row: ExtrinsicRow) -> None:
            ids = [item.id for item in signed_items]
            await repository.mark_submitted(tx, ids, row.id, row.tx_hash, now)
            await repository.mark_waiting(tx, [item.id for item in waiting], reason, now)

        if count == 0:
            async with context.database.transaction() as tx:
                await hold(tx, batch.claim)
                await repository.mark_waiting(tx, [item.id for item in waiting], reason, now)
                await tx.commit()
            assert reason is not None
            batch.done([item.id for item in waiting], Wait(reason, FUNDS_DELAY))
            return []
        row = await slot.sign(parts[:count], cost=needed, held=batch.claim, link=link)
    if reason is not None:
        batch.done([item.id for item in waiting], Wait(reason, FUNDS_DELAY))
    return [_Followed(row, list(parts[:count]), signed_items)]


async def _fee(context: JobContext, signer: Signer, parts: Sequence[Part]) -> int:
    """The fee of an extrinsic of ``parts``, as the runtime says before it is signed."""
    weight = await context.chains.run(signer.chain, lambda g: g.weigh(signer.public_key, parts))
    return weight.fee


def _complete(found: ChainItem | None, metadata: str | None) -> bool:
    """An NFT on chain with the product's metadata (or a product without)."""
    return found is not None and (not metadata or found.metadata == metadata)


async def _record_found(
    batch: _Batch, items: Sequence[JobItem], on_chain: Mapping[int, ChainItem]
) -> None:
    """NFTs found on chain as they should be (a run that died after they landed, a repair):
    recorded as minted to the wallet that holds each."""
    if not items:
        return
    await _write_minted(batch, {item.id: on_chain[item.item_id].owner for item in items}, None)
    batch.done([item.id for item in items], Done())


async def _write_minted(
    batch: _Batch, holders: Mapping[uuid.UUID, bytes], landed: tuple[ExtrinsicRow, Landed] | None
) -> None:
    """The items' NFTs are minted, sitting in those wallets (``holders``: their public keys):
    recorded, with the block when the ledger says which, and announced (``nft.minted``)."""
    context, product = batch.context, batch.product
    wallets = await context.database.read(
        repository.held_wallets, product.project_id, list(set(holders.values()))
    )
    now = utcnow()
    written: list[dict[str, Any]] = []
    for item_id, holder in holders.items():
        wallet = wallets.get(holder)
        values: dict[str, Any] = {
            "id": item_id,
            "nft_status": NftStatus.MINTED if wallet else NftStatus.EXTERNAL,
            "nft_wallet_id": wallet.id if wallet else None,
            "nft_held_by": None if wallet else holder.hex(),
            "nft_reason": None,
            "updated_at": now,
        }
        if landed is not None:
            row, where = landed
            values |= {
                "nft_tx_hash": row.tx_hash,
                "nft_block": where.inclusion.block_number,
                "nft_block_hash": where.inclusion.block_hash,
            }
        else:  # found on chain: what an earlier attempt recorded did not mint it
            values |= {"nft_tx_hash": None, "nft_block": None, "nft_block_hash": None}
        written.append(values)
    seconds = [(now - batch.items[item_id].created_at).total_seconds() for item_id in holders]
    async with context.database.transaction() as tx:
        await hold(tx, batch.claim)
        if landed is not None:
            row, where = landed
            await ledger.mark_final(tx, row.id, where.block, where.outcome.fee, now)
        await repository.write_items(tx, written)
        await counts.add_counts(
            tx,
            counts.observe_many(
                "tessera_nft_mint_seconds",
                {"chain": str(product.chain)},
                seconds,
                MINT_SECONDS,
            ),
        )
        await record_items(tx, product, EventType.NFT_MINTED, list(holders))
        await tx.commit()


async def _record(batch: _Batch, followed: _Followed, result: Landed | Gone) -> None:
    """What became of the claim's items that the extrinsic carries."""
    row, parts, carried = followed.row, followed.parts, followed.items
    ours = {part.item_id: part for part in parts if isinstance(part, Mint)}
    if isinstance(result, Gone):
        now = utcnow()
        async with batch.context.database.transaction() as tx:
            await hold(tx, batch.claim)
            ids = [item.id for item in carried]
            await repository.mark_waiting(tx, ids, result.reason, now)
            if not result.live:  # signed anew next time
                await repository.write_items(tx, [{"id": i, "nft_extrinsic_id": None} for i in ids])
            await tx.commit()
        batch.done([item.id for item in carried], Wait(result.reason, 0))
        return
    fates = dict(zip(ours, result.outcome.parts, strict=True))
    minted: dict[uuid.UUID, bytes] = {}
    failed: dict[uuid.UUID, str] = {}
    metadata_only: list[JobItem] = []
    for item in carried:
        part, fate = ours[item.item_id], fates[item.item_id]
        if fate.error is not None:
            failed[item.id] = fate.error
        elif part.owner is None:
            metadata_only.append(item)
        else:
            minted[item.id] = part.owner
    if metadata_only:  # the NFT was there already: whoever holds it holds it still
        product = batch.product
        assert product.nft_collection_id is not None and product.chain is not None
        collection_id = product.nft_collection_id
        holders = await batch.context.chains.run(
            product.chain,
            lambda g: g.items(collection_id, [item.item_id for item in metadata_only], final=True),
        )
        minted |= {
            item.id: holders[item.item_id].owner
            for item in metadata_only
            if item.item_id in holders
        }
    await _write_minted(batch, minted, (row, result))
    batch.done(list(minted), Done())
    reasons = {item_id: f"{error} (in {row.tx_hash})" for item_id, error in failed.items()}
    await fail_alone(batch.context, batch.claim, reasons, transfer=False)
    for item_id, error in failed.items():
        batch.outcomes[batch.jobs[item_id].id] = Failed(error)
