"""Transfers mirrored on chain, many signers at once (docs/chain.md).

The worker claims a project's due transfers together (batch key ``transfer:<project id>``).
Each NFT is moved by the custodial wallet that holds it on chain, to its new owner's receiving
wallet; when the chain already agrees there is nothing to do. Custodial wallets hold no funds:
the project wallet first sends each holder that lacks it the fee and the existential deposit,
all of them in one extrinsic of its own; then every holder signs its transfers (one extrinsic
each, all in flight at once, each from its own nonce sequence). Everything is recorded in the
ledger before it is submitted and followed to its final block, as mints are
(``tessera.nfts.mints``): a run that dies follows what it recorded, and a holder funded once is
not funded again (its balance says so).
"""

import asyncio
import uuid
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tessera.chain.extrinsics import parts_of
from tessera.chain.gateway import ChainGateway, ChainItem, Fund, Part, Transfer
from tessera.chain.keys import CUSTODIAL
from tessera.changes.schemas import EventType
from tessera.db import Transaction
from tessera.extrinsics import repository as ledger
from tessera.extrinsics.fees import costs
from tessera.extrinsics.repository import ExtrinsicRow
from tessera.extrinsics.schemas import Followed, Gone, Landed, Signer
from tessera.extrinsics.service import follow_all, signing, submit_all
from tessera.jobs.repository import JobRow
from tessera.jobs.worker import Claim, Done, Failed, JobContext, JobOutcome, Wait, hold
from tessera.models import LIVE, NftStatus
from tessera.models.base import utcnow
from tessera.nfts import repository
from tessera.nfts.schemas import HeldWallet, JobItem
from tessera.nfts.service import fail_alone, item_id_of, record_items, signer_of
from tessera.products import item_repository
from tessera.products import repository as products
from tessera.products.rows import ProductRow

NOT_MINTED_DELAY = 2.0
FUNDS_DELAY = 10.0
# Transfers handled in one claim at most: each holder's extrinsic is signed and followed.
MAX_TRANSFERS = 500
# Holders' extrinsics signed at once (their signing reads the chain and writes the ledger).
SIGNING_AT_ONCE = 16
NO_ADDRESS = bytes(32)
FUND = "Balances.transfer_keep_alive"


async def capacity(context: JobContext, job: JobRow) -> int:
    """As many transfers as one extrinsic of the project wallet funds the holders of, at most
    ``MAX_TRANSFERS``."""
    item = await context.database.read(item_repository.item_row, item_id_of(job))
    if item is None:
        return 1
    product = await context.database.read(
        products.get_product_row, item.project_id, item.product_id
    )
    if product.chain is None:
        return 1
    wallet = await context.database.read(repository.project_wallet, product.project_id)
    found = await costs(context, product.chain, wallet.public_key, Fund(NO_ADDRESS, 1))
    return min(found.capacity, MAX_TRANSFERS)


@dataclass(slots=True)
class _Batch:
    context: JobContext
    claim: Claim
    chain: str
    sponsor: Signer
    products: Mapping[uuid.UUID, ProductRow]
    jobs: dict[uuid.UUID, JobRow]  # by item id
    items: dict[uuid.UUID, JobItem]
    outcomes: dict[uuid.UUID, JobOutcome]
    # Items whose NFT is where it should be: moved by an extrinsic, or already there (None).
    transferred: dict[uuid.UUID, Landed | None] = field(default_factory=dict)

    def done(self, item_ids: Sequence[uuid.UUID], outcome: JobOutcome) -> None:
        for item_id in item_ids:
            self.outcomes[self.jobs[item_id].id] = outcome


async def transfer(context: JobContext, claim: Claim) -> Mapping[uuid.UUID, JobOutcome]:
    outcomes: dict[uuid.UUID, JobOutcome] = {}
    jobs = {item_id_of(job): job for job in claim.jobs}
    items = await context.database.read(repository.job_items, list(jobs))
    ready: list[JobItem] = []
    for item_id, job in jobs.items():
        item = items.get(item_id)
        if item is None:
            outcomes[job.id] = Done()
        elif item.nft_status == NftStatus.FAILED:
            outcomes[job.id] = Failed("the item could not be minted")
        elif item.nft_status == NftStatus.EXTERNAL:
            outcomes[job.id] = Failed("its NFT sits in a wallet outside the project")
        elif item.nft_status != NftStatus.MINTED:
            outcomes[job.id] = Wait("the item is not minted yet", NOT_MINTED_DELAY)
        elif item.wallet_key is None:
            outcomes[job.id] = Failed(f"user {item.owner_id} has no wallet")
        else:
            ready.append(item)
    if not ready:
        return outcomes
    project_id = ready[0].project_id
    found = await context.database.read(
        products.products_by_id, project_id, {item.product_id for item in ready}
    )
    wallet = await context.database.read(repository.project_wallet, project_id)
    by_chain: dict[str, list[JobItem]] = defaultdict(list)
    for item in ready:
        by_chain[str(found[item.product_id].chain)].append(item)
    for chain, chain_items in by_chain.items():
        batch = _Batch(
            context,
            claim,
            chain,
            signer_of(context, project_id, chain, wallet),
            found,
            {item.id: jobs[item.id] for item in chain_items},
            {item.id: item for item in chain_items},
            outcomes,
        )
        await _run(batch)
        await _record_transferred(batch)
    return outcomes


async def _run(batch: _Batch) -> None:
    context = batch.context
    carried = [
        i.nft_transfer_extrinsic_id for i in batch.items.values() if i.nft_transfer_extrinsic_id
    ]
    recorded = await context.database.read(ledger.extrinsics, carried)
    live = {row.id: row for row in recorded.values() if row.status in LIVE}
    # A run that died: follow what it recorded (a funding, or holders' transfers).
    resumed = await _follow(batch, list(live.values()))
    fresh = [
        item
        for item in batch.items.values()
        if item.nft_transfer_extrinsic_id not in live or resumed.get(item.id) == "funded"
    ]
    if fresh:
        await _move(batch, fresh)


async def _follow(batch: _Batch, rows: Sequence[ExtrinsicRow]) -> dict[uuid.UUID, str]:
    """Follow the extrinsics to their fate and record it; the items whose funding landed (for
    their transfers to be signed next) as "funded"."""
    if not rows:
        return {}
    context = batch.context
    holders = await context.database.read(
        repository.held_wallets,
        batch.sponsor.project_id,
        [bytes.fromhex(row.signer) for row in rows if row.call != FUND],
    )
    followed = []
    for row in rows:
        if row.call == FUND:
            signer = batch.sponsor
        else:
            holder = holders.get(bytes.fromhex(row.signer))
            if holder is None:
                continue
            signer = signer_of(context, batch.sponsor.project_id, batch.chain, holder)
        followed.append(Followed(signer, row, parts_of(row.body)))
    results = await follow_all(context, followed, held=batch.claim)
    funded: dict[uuid.UUID, str] = {}
    for one, result in zip(followed, results, strict=True):
        carried = [i for i in batch.items.values() if i.nft_transfer_extrinsic_id == one.row.id]
        if one.row.call == FUND:
            funded |= await _funding_fate(batch, one, result, carried)
        else:
            await _transfer_fate(batch, one, result, carried)
    return funded


async def _funding_fate(
    batch: _Batch, one: Followed, result: Landed | Gone, carried: Sequence[JobItem]
) -> dict[uuid.UUID, str]:
    """A funding a run that died recorded: once final, its holders' items go on to their
    transfers (a holder it could not fund is found short again, and funded again)."""
    if isinstance(result, Gone):
        await _waiting(batch, carried, result.reason, clear=not result.live)
        return {}
    async with batch.context.database.transaction() as tx:
        await hold(tx, batch.claim)
        await ledger.mark_final(tx, one.row.id, result.block, result.outcome.fee, utcnow())
        await tx.commit()
    return dict.fromkeys((item.id for item in carried), "funded")


async def _transfer_fate(
    batch: _Batch, one: Followed, result: Landed | Gone, carried: Sequence[JobItem]
) -> None:
    if isinstance(result, Gone):
        await _waiting(batch, carried, result.reason, clear=not result.live)
        return
    fates = {
        part.item_id: fate
        for part, fate in zip(one.parts, result.outcome.parts, strict=True)
        if isinstance(part, Transfer)
    }
    failed: dict[uuid.UUID, str] = {}
    for item in carried:
        fate = fates.get(item.item_id)
        if fate is None:
            continue
        if fate.error is not None:
            failed[item.id] = fate.error
        else:
            batch.transferred[item.id] = result
    async with batch.context.database.transaction() as tx:
        await hold(tx, batch.claim)
        await ledger.mark_final(tx, one.row.id, result.block, result.outcome.fee, utcnow())
        await tx.commit()
    await _failed(batch, failed, one.row.tx_hash)


async def _waiting(
    batch: _Batch, items: Sequence[JobItem], reason: str, *, clear: bool, delay: float = 0
) -> None:
    """The items' transfers are queued again, waiting for ``reason`` (``clear``: signed anew
    next time, what carried them can never land)."""
    if not items:
        return
    now = utcnow()
    ids = [item.id for item in items]
    async with batch.context.database.transaction() as tx:
        await hold(tx, batch.claim)
        await repository.mark_waiting(tx, ids, reason, now, transfer=True)
        if clear:
            await repository.write_items(
                tx, [{"id": i, "nft_transfer_extrinsic_id": None} for i in ids]
            )
        await tx.commit()
    batch.done(ids, Wait(reason, delay))


async def _failed(
    batch: _Batch, failed: Mapping[uuid.UUID, str], tx_hash: str | None = None
) -> None:
    """Those transfers failed alone (the pallet's error, in the extrinsic ``tx_hash``): tried
    again later."""
    where = f" (in {tx_hash})" if tx_hash else ""
    reasons = {item_id: error + where for item_id, error in failed.items()}
    await fail_alone(batch.context, batch.claim, reasons, transfer=True)
    for item_id, error in failed.items():
        batch.outcomes[batch.jobs[item_id].id] = Failed(error)


async def _move(batch: _Batch, items: Sequence[JobItem]) -> None:
    """Fund the holders that lack it, then sign every holder's transfers, all in flight at
    once, and follow them."""
    context, chain = batch.context, batch.chain
    by_collection: dict[int, list[JobItem]] = defaultdict(list)
    for item in items:
        collection_id = batch.products[item.product_id].nft_collection_id
        assert collection_id is not None  # its NFT is minted
        by_collection[collection_id].append(item)

    def read(gateway: ChainGateway) -> tuple[dict[int, dict[int, ChainItem]], int]:
        owners = {
            collection_id: gateway.items(collection_id, [item.item_id for item in some])
            for collection_id, some in by_collection.items()
        }
        return owners, gateway.deposits().existential

    owners, existential = await context.chains.run(chain, read)
    holders = await context.database.read(
        repository.held_wallets,
        batch.sponsor.project_id,
        list({nft.owner for some in owners.values() for nft in some.values()}),
    )
    moves: dict[bytes, list[tuple[JobItem, Transfer]]] = defaultdict(list)
    for collection_id, some in by_collection.items():
        for item in some:
            nft = owners[collection_id].get(item.item_id)
            assert item.wallet_key is not None  # checked by the caller
            if nft is None:
                batch.outcomes[batch.jobs[item.id].id] = Failed("its NFT is not on chain")
            elif nft.owner == item.wallet_key:
                batch.transferred[item.id] = None  # the chain agrees already
            elif (holder := holders.get(nft.owner)) is None or holder.custody != CUSTODIAL:
                batch.outcomes[batch.jobs[item.id].id] = Failed(
                    "the on-chain owner is not a custodial wallet of this project"
                )
            else:
                moves[nft.owner].append(
                    (item, Transfer(collection_id, item.item_id, item.wallet_key))
                )
    if not moves:
        return
    ready = await _fund(batch, moves, holders, existential)
    if not ready:
        return
    gate = asyncio.Semaphore(SIGNING_AT_ONCE)

    async def sign(holder_key: bytes) -> Followed:
        async with gate:
            return await _sign_holder(batch, holders[holder_key], moves[holder_key])

    signed = list(await asyncio.gather(*(sign(key) for key in ready)))
    # Submitted together, once all are signed: they share blocks.
    submitted = await submit_all(context, [one.row for one in signed])
    for one, row in zip(list(signed), submitted, strict=True):
        if row.status not in LIVE:
            await _waiting(
                batch,
                [item for item, _ in moves[one.signer.public_key]],
                row.error or "refused",
                clear=True,
            )
    signed = [
        Followed(one.signer, row, one.parts)
        for one, row in zip(signed, submitted, strict=True)
        if row.status in LIVE
    ]
    results = await follow_all(context, signed, held=batch.claim)
    for one, result in zip(signed, results, strict=True):
        carried = [item for item, _ in moves[one.signer.public_key]]
        await _transfer_fate(batch, one, result, carried)


async def _fund(
    batch: _Batch,
    moves: Mapping[bytes, list[tuple[JobItem, Transfer]]],
    holders: Mapping[bytes, HeldWallet],
    existential: int,
) -> list[bytes]:
    """Send each holder that lacks it the fees of its transfers and the existential deposit,
    in one extrinsic of the project wallet, and follow it; the holders ready to sign."""
    context, chain, sponsor = batch.context, batch.chain, batch.sponsor
    some_holder = next(iter(moves))
    estimate = await costs(context, chain, some_holder, Transfer(0, 0, NO_ADDRESS))
    accounts = await context.chains.run(chain, lambda g: g.accounts(list(moves)))
    short: dict[bytes, int] = {}
    for key, some in moves.items():
        fee = estimate.fee_base + len(some) * estimate.fee_per_part
        needed = 2 * fee + existential  # a margin: fees move with the chain's load
        if accounts[key].free < needed:
            short[key] = needed - accounts[key].free
    ready = [key for key in moves if key not in short]
    if not short:
        return ready
    parts: list[Part] = [Fund(key, amount) for key, amount in short.items()]
    funded_items = [item for key in short for item, _ in moves[key]]
    async with signing(context, sponsor) as slot:
        fee = (await context.chains.run(chain, lambda g: g.weigh(sponsor.public_key, parts))).fee
        cost = fee + sum(short.values())
        if cost > slot.available:
            what = f"sending {len(short)} holders the fees of their transfers"
            reason = slot.short_of_funds(what, cost)
            await _waiting(batch, funded_items, reason, clear=True, delay=FUNDS_DELAY)
            return ready
        now = utcnow()

        async def link(tx: Transaction, row: ExtrinsicRow) -> None:
            ids = [item.id for item in funded_items]
            await repository.mark_submitted(tx, ids, row.id, row.tx_hash, now, transfer=True)

        row = await slot.sign(parts, cost=cost, held=batch.claim, link=link)
    [result] = await follow_all(context, [Followed(sponsor, row, parts)], held=batch.claim)
    if isinstance(result, Gone):
        await _waiting(batch, funded_items, result.reason, clear=not result.live)
        return ready
    async with context.database.transaction() as tx:
        await hold(tx, batch.claim)
        await ledger.mark_final(tx, row.id, result.block, result.outcome.fee, utcnow())
        await tx.commit()
    for part, fate in zip(parts, result.outcome.parts, strict=True):
        assert isinstance(part, Fund)
        if fate.error is None:
            ready.append(part.dest)
        else:
            await _failed(
                batch,
                {item.id: f"funding its holder: {fate.error}" for item, _ in moves[part.dest]},
            )
    return ready


async def _sign_holder(
    batch: _Batch, holder: HeldWallet, moves: Sequence[tuple[JobItem, Transfer]]
) -> Followed:
    signer = signer_of(batch.context, batch.sponsor.project_id, batch.chain, holder)
    parts: list[Part] = [part for _, part in moves]
    now = utcnow()

    async def link(tx: Transaction, row: ExtrinsicRow) -> None:
        ids = [item.id for item, _ in moves]
        await repository.mark_submitted(tx, ids, row.id, row.tx_hash, now, transfer=True)

    async with signing(batch.context, signer) as slot:
        fee = (
            await batch.context.chains.run(batch.chain, lambda g: g.weigh(signer.public_key, parts))
        ).fee
        row = await slot.sign(parts, cost=fee, held=batch.claim, link=link, submit=False)
    return Followed(signer, row, parts)


async def _record_transferred(batch: _Batch) -> None:
    """The transfers that landed (or that the chain agreed with already): recorded on their
    items, with the block, and announced (``nft.transferred``)."""
    if not batch.transferred:
        return
    now = utcnow()
    written: list[dict[str, Any]] = []
    for item_id, landed in batch.transferred.items():
        item = batch.items[item_id]
        values: dict[str, Any] = {
            "id": item_id,
            "nft_transfer_status": NftStatus.TRANSFERRED,
            "nft_status": NftStatus.MINTED,
            "nft_wallet_id": item.wallet_id,
            "nft_held_by": None,
            "nft_transfer_reason": None,
            "updated_at": now,
        }
        if landed is not None:
            values |= {
                "nft_transfer_tx_hash": landed.extrinsic.tx_hash,
                "nft_transfer_block": landed.inclusion.block_number,
                "nft_transfer_block_hash": landed.inclusion.block_hash,
            }
        else:
            values |= {
                "nft_transfer_tx_hash": None,
                "nft_transfer_block": None,
                "nft_transfer_block_hash": None,
            }
        written.append(values)
    by_product: dict[uuid.UUID, list[uuid.UUID]] = defaultdict(list)
    for item_id in batch.transferred:
        by_product[batch.items[item_id].product_id].append(item_id)
    async with batch.context.database.transaction() as tx:
        await hold(tx, batch.claim)
        # Rows written alike in one round trip: those with a block and those without.
        for has_block in (True, False):
            same = [v for v in written if (v["nft_transfer_block"] is not None) == has_block]
            await repository.write_items(tx, same)
        for product_id, ids in by_product.items():
            await record_items(tx, batch.products[product_id], EventType.NFT_TRANSFERRED, ids)
        await tx.commit()
    batch.done(list(batch.transferred), Done())
