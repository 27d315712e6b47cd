"""The ledger of signed extrinsics: every custodial signer's nonces, shared by every worker, and
each extrinsic followed from its signing to its final block (docs/chain.md).

Signing (``signing``): one signer's extrinsics are signed one at a time across every process
(``Database.exclusive``). The next nonce is the lowest one, from the chain's, that no extrinsic
of the ledger whose fate is unknown holds: several extrinsics of a signer are in flight at once
with consecutive nonces, and a nonce given up (an extrinsic that can never land) is taken again,
so the signer never stalls. An extrinsic is recorded, with its bytes, in the transaction that
links it to what it carries, before it is submitted; it is submitted while the lock is held, so
that a signer's extrinsics reach the pool in their nonces' order.

Following (``follow``): until its block is final. While its nonce is unspent it may still land:
when it is the signer's next and has gone unseen in a block for ``chain_resubmit_seconds``, the
same bytes are submitted again (they land at most once); when a lower nonce holds it up that
long, that nonce's recorded bytes are submitted again, or, when none of the ledger's can land
any more, a filler (``System.remark``) takes it. Once its nonce is spent the chain's blocks say
whether it landed, and where (its mortal era bounds the search); once that block is final, its
events say what became of each part. A block dropped before it is final sends it back to
submitted.
"""

import asyncio
import hashlib
import logging
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass

from tessera.chain.extrinsics import call_name, parts_json
from tessera.chain.gateway import (
    ChainError,
    ChainGateway,
    Filler,
    Fund,
    Inclusion,
    Mint,
    Outcome,
    Part,
    Rejected,
    Transfer,
)
from tessera.chain.keys import ss58_address
from tessera.db import Transaction
from tessera.errors import ChainUnavailable
from tessera.extrinsics import repository
from tessera.extrinsics.repository import ExtrinsicRow
from tessera.extrinsics.schemas import Followed, Gone, Landed, Signer
from tessera.instruments import counts
from tessera.instruments.counts import PARTS
from tessera.jobs.queue import FUNDS
from tessera.jobs.repository import JobRow
from tessera.jobs.worker import Claim, JobContext, hold
from tessera.models import ExtrinsicStatus
from tessera.models.base import utcnow

log = logging.getLogger("tessera.extrinsics")

# A held-up extrinsic is submitted again after TESSERA_CHAIN_RESUBMIT_SECONDS, then after twice
# that, and so on up to this many times that.
MAX_PATIENCE = 8


# The caller's writes in the transaction that records an extrinsic (what it carries).
Link = Callable[[Transaction, ExtrinsicRow], Awaitable[None]]


def signer_lock(chain: str, public_key: bytes) -> int:
    """The 64-bit key of a signer's lock (``Database.exclusive``)."""
    digest = hashlib.blake2b(f"{chain}:{public_key.hex()}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


# Capacity: how many parts of a kind fit one extrinsic.


@dataclass(slots=True)
class Slot:
    """A signer, while it is the only one signing: the nonce its next extrinsic takes, and what
    it may spend (its free balance less what its extrinsics in flight will cost, keeping the
    existential deposit)."""

    context: JobContext
    signer: Signer
    nonce: int
    free: int
    pending: int
    existential: int
    expired: list[uuid.UUID]

    @property
    def available(self) -> int:
        return self.free - self.pending - self.existential

    def short_of_funds(self, what: str, needed: int) -> str:
        """Why ``what`` (needing ``needed`` planck) waits, in words: what the signer holds."""
        config = self.context.chains.config(self.signer.chain)
        held = f"{config.amount(self.free)} on {config.name}"
        if self.pending:
            held += f", {config.amount(self.pending)} of it for extrinsics in flight"
        address = ss58_address(self.signer.public_key, config.ss58_prefix)
        return (
            f"{FUNDS}: the project wallet {address} holds {held}; {what} needs "
            f"{config.amount(needed)} and {config.amount(self.existential)} kept"
        )

    async def sign(
        self,
        parts: Sequence[Part],
        *,
        cost: int,
        held: Claim | JobRow,
        link: Link | None = None,
        submit: bool = True,
    ) -> ExtrinsicRow:
        """Sign ``parts`` with the slot's nonce, record the extrinsic (and ``link`` it) while
        ``held`` keeps its lease, then submit it (unless ``submit`` is false: the caller
        submits it with others, ``submit_all``). The recorded row, dropped if the pool refused
        it for good."""
        context, signer = self.context, self.signer
        era = context.chains.settings.chain_era_blocks
        nonce = self.nonce
        signed = await context.chains.run(
            signer.chain, lambda g: g.sign(signer.seed, parts, nonce=nonce, era_blocks=era)
        )
        call = _call_of(parts)
        now = utcnow()
        async with context.database.transaction() as tx:
            await hold(tx, held)
            await repository.mark_dropped(tx, self.expired, "its era passed before it landed", now)
            row = await repository.add_extrinsic(
                tx,
                {
                    "project_id": signer.project_id,
                    "chain": signer.chain,
                    "signer": signer.public_key.hex(),
                    "nonce": signed.nonce,
                    "call": call,
                    "parts": len(parts),
                    "body": parts_json(parts),
                    "cost": cost,
                    "data": signed.extrinsic,
                    "tx_hash": signed.tx_hash,
                    "valid_from": signed.valid_from,
                    "valid_until": signed.valid_until,
                    "status": ExtrinsicStatus.SIGNED,
                    "created_at": now,
                },
            )
            if link is not None:
                await link(tx, row)
            labels = {"chain": signer.chain, "call": call}
            await counts.add_counts(
                tx,
                [
                    counts.counter("tessera_chain_extrinsics_submitted_total", labels),
                    *counts.observe("tessera_chain_nfts_per_extrinsic", labels, len(parts), PARTS),
                ],
            )
            await tx.commit()
        self.expired = []
        self.nonce += 1
        self.pending += cost
        return await _submit(context, row) if submit else row


@asynccontextmanager
async def signing(context: JobContext, signer: Signer) -> AsyncIterator[Slot]:
    """The signer's slot, alone among every worker until the block ends."""
    database, chains = context.database, context.chains
    async with database.exclusive(signer_lock(signer.chain, signer.public_key)):

        def read(gateway: ChainGateway) -> tuple[int, int, int, int]:
            account, head = gateway.account(signer.public_key), gateway.head()
            return account.nonce, account.free, head.best, gateway.deposits().existential

        chain_nonce, free, best, existential = await chains.run(signer.chain, read)
        live = await database.read(
            repository.live_of_signer, signer.chain, signer.public_key, from_nonce=chain_nonce
        )
        # Unspent at the best block and too old for the next one: they can never land.
        expired = [
            row.id
            for row in live
            if row.status != ExtrinsicStatus.INCLUDED and row.valid_until <= best + 1
        ]
        holding = [row for row in live if row.id not in expired]
        taken = {row.nonce for row in holding}
        nonce = chain_nonce
        while nonce in taken:
            nonce += 1
        pending = sum(row.cost for row in holding if row.status != ExtrinsicStatus.INCLUDED)
        yield Slot(context, signer, nonce, free, pending, existential, expired)


def _call_of(parts: Sequence[Part]) -> str:
    """What an extrinsic does, by the call of its parts (all of one kind)."""
    first = parts[0]
    if isinstance(first, Mint):
        return "Nfts.mint" if first.owner is not None else "Nfts.set_metadata"
    if isinstance(first, Transfer):
        return "Nfts.transfer"
    if isinstance(first, Fund):
        return "Balances.transfer_keep_alive"
    return call_name(parts)


async def submit_all(context: JobContext, rows: Sequence[ExtrinsicRow]) -> list[ExtrinsicRow]:
    """Submit recorded extrinsics (of different signers, each its signer's next) at once: they
    reach the pool together, and share a block when they fit one. The rows as they now
    stand."""
    if not rows:
        return []
    datas = [row.data for row in rows if row.data is not None]
    assert len(datas) == len(rows)  # recorded, not yet final or dropped
    now = utcnow()
    try:
        refused = await context.chains.run(rows[0].chain, lambda g: g.submit_many(datas))
    except ChainUnavailable as unavailable:  # followed, and submitted again, later
        log.warning("%s extrinsics not submitted now: %s", len(rows), unavailable.message)
        return list(rows)
    shown = []
    async with context.database.transaction() as tx:
        for row, rejected in zip(rows, refused, strict=True):
            if rejected is None:
                await repository.mark_submitted(tx, row.id, now)
                shown.append(row._replace(status=ExtrinsicStatus.SUBMITTED, submitted_at=now))
            elif rejected.dead:
                log.warning("extrinsic %s dropped: %s", row.tx_hash, rejected)
                await repository.mark_dropped(tx, [row.id], str(rejected), now)
                shown.append(row._replace(status=ExtrinsicStatus.DROPPED, error=str(rejected)))
            else:
                shown.append(row)
        await tx.commit()
    return shown


async def _submit(context: JobContext, row: ExtrinsicRow) -> ExtrinsicRow:
    """Hand the recorded bytes to the pool; the row as it now stands."""
    assert row.data is not None
    data = row.data
    now = utcnow()
    try:
        await context.chains.run(row.chain, lambda g: g.submit(data))
    except Rejected as rejected:
        if not rejected.dead:
            log.info("extrinsic %s (nonce %s): %s", row.tx_hash, row.nonce, rejected)
            return row
        log.warning("extrinsic %s (nonce %s) dropped: %s", row.tx_hash, row.nonce, rejected)
        async with context.database.transaction() as tx:
            await repository.mark_dropped(tx, [row.id], str(rejected), now)
            await tx.commit()
        return row._replace(status=ExtrinsicStatus.DROPPED, error=str(rejected), data=None)
    except ChainUnavailable as unavailable:  # followed, and submitted again, later
        log.warning("extrinsic %s: not submitted now: %s", row.tx_hash, unavailable.message)
        return row
    async with context.database.transaction() as tx:
        await repository.mark_submitted(tx, row.id, now)
        await tx.commit()
    if row.status == ExtrinsicStatus.SIGNED:
        return row._replace(status=ExtrinsicStatus.SUBMITTED, submitted_at=now)
    return row


# Following.


@dataclass(frozen=True, slots=True)
class _Seen:
    kind: str  # final, included, reorged, spent, expired, pending
    inclusion: Inclusion | None = None
    outcome: Outcome | None = None
    chain_nonce: int = 0


def _observe(
    gateway: ChainGateway,
    rows: Sequence[ExtrinsicRow],
    parts: Sequence[Sequence[Part]],
    known: Sequence[Inclusion | None],
) -> list[_Seen]:
    """Where each extrinsic stands on the chain now: one look at the head and at the signers'
    accounts for all of them."""
    # The accounts before the head: a nonce seen spent is spent in a block the head has.
    accounts = gateway.accounts(list({bytes.fromhex(row.signer) for row in rows}))
    head = gateway.head()
    nonces = [accounts[bytes.fromhex(row.signer)].nonce for row in rows]
    looked_for = [i for i, row in enumerate(rows) if known[i] is None and nonces[i] > row.nonce]
    found: dict[str, Inclusion] = {}
    if looked_for:
        first = min(rows[i].valid_from for i in looked_for)
        last = min(head.best, max(rows[i].valid_until - 1 for i in looked_for))
        found = gateway.find([rows[i].tx_hash for i in looked_for], first=first, last=last)
    hashes: dict[int, str | None] = {}
    seen = []
    for i, row in enumerate(rows):
        inclusion = known[i] or found.get(row.tx_hash)
        if inclusion is None:
            if nonces[i] > row.nonce:
                seen.append(_Seen("spent", chain_nonce=nonces[i]))
            elif head.best + 1 >= row.valid_until:
                seen.append(_Seen("expired", chain_nonce=nonces[i]))
            else:
                seen.append(_Seen("pending", chain_nonce=nonces[i]))
            continue
        number = inclusion.block_number
        if number not in hashes:
            hashes[number] = gateway.block_hash(number)
        if hashes[number] != inclusion.block_hash:
            seen.append(_Seen("reorged", inclusion))
        elif head.finalized >= number:
            seen.append(_Seen("final", inclusion, gateway.outcome(inclusion, parts[i])))
        else:
            seen.append(_Seen("included", inclusion))
    return seen


async def follow(
    context: JobContext,
    signer: Signer,
    row: ExtrinsicRow,
    parts: Sequence[Part],
    *,
    held: Claim | JobRow,
) -> Landed | Gone:
    """Follow ``signer``'s extrinsic until its block is final (``Landed``) or it is gone
    (``Gone``); ``parts``: what it carries, as signed."""
    [result] = await follow_all(context, [Followed(signer, row, parts)], held=held)
    return result


async def follow_all(
    context: JobContext, followed: Sequence[Followed], *, held: Claim | JobRow
) -> list[Landed | Gone]:
    """Follow the extrinsics (of any signers) until each is final or gone, looking at the chain
    once a round for all of them."""
    settings = context.chains.settings
    rows = [f.row for f in followed]
    known: list[Inclusion | None] = [
        Inclusion(row.block_number, row.block_hash, row.block_index or 0)
        if row.status == ExtrinsicStatus.INCLUDED
        and row.block_number is not None
        and row.block_hash is not None
        else None
        for row in rows
    ]
    results: list[Landed | Gone | None] = [None] * len(rows)
    # Per extrinsic: the signer's chain nonce last seen, when it last moved (or was submitted
    # again), and how long it may stand still before its bytes are submitted (again): doubled
    # each time, so that a node slow to build its blocks is not flooded with copies (Chopsticks
    # builds a block for each, and under load takes seconds a block).
    last_nonce = [-1] * len(rows)
    moved_at = [time.monotonic()] * len(rows)
    patience = [settings.chain_resubmit_seconds] * len(rows)
    while True:
        open_ = [i for i, result in enumerate(results) if result is None]
        if not open_:
            return [result for result in results if result is not None]
        try:
            seen = await _look(
                context,
                [rows[i] for i in open_],
                [followed[i].parts for i in open_],
                [known[i] for i in open_],
            )
        except ChainUnavailable as unavailable:
            log.warning("following %s extrinsics: %s", len(open_), unavailable.message)
            await asyncio.sleep(settings.chain_poll_seconds * 4)
            continue
        now = utcnow()
        pool: set[str] | None = None
        for i, look in zip(open_, seen, strict=True):
            row = rows[i]
            if look.kind == "final":
                assert look.inclusion is not None and look.outcome is not None
                results[i] = Landed(row, look.inclusion, look.outcome)
            elif look.kind == "included" and look.inclusion != known[i]:
                known[i] = inclusion = look.inclusion
                assert inclusion is not None
                block = (inclusion.block_number, inclusion.block_hash, inclusion.index)
                await _write(context, repository.mark_included, row.id, block, now)
            elif look.kind == "reorged":
                await _write(context, repository.mark_unincluded, row.id, now)
                number = look.inclusion.block_number if look.inclusion else "?"
                results[i] = Gone(f"its block {number} was dropped before it was final", live=True)
            elif look.kind in ("spent", "expired"):
                reason = (
                    "its nonce went to another extrinsic"
                    if look.kind == "spent"
                    else "its era passed before it landed"
                )
                await _write(context, repository.mark_dropped, [row.id], reason, now)
                results[i] = Gone(reason, live=False)
            elif look.kind == "pending":
                if look.chain_nonce != last_nonce[i]:
                    last_nonce[i], moved_at[i] = look.chain_nonce, time.monotonic()
                never_sent = row.status == ExtrinsicStatus.SIGNED and look.chain_nonce == row.nonce
                if never_sent or time.monotonic() - moved_at[i] >= patience[i]:
                    moved_at[i] = time.monotonic()
                    most = MAX_PATIENCE * settings.chain_resubmit_seconds
                    patience[i] = min(2 * patience[i], most)
                    if pool is None:  # once a round, and only when something is held up
                        pool = await _pool(context, row.chain)
                    if not never_sent and look.chain_nonce == row.nonce and row.tx_hash in pool:
                        continue  # waiting its turn in the pool: nothing lost
                    gone = await _unstall(context, followed[i].signer, row, look.chain_nonce, held)
                    if gone is not None:
                        results[i] = gone
                    rows[i] = row._replace(status=ExtrinsicStatus.SUBMITTED)
        if any(result is None for result in results):
            await asyncio.sleep(settings.chain_poll_seconds)


async def _pool(context: JobContext, chain: str) -> set[str]:
    """What the node's pool holds (nothing known when it does not say: then everything held
    up is submitted again)."""
    try:
        return await context.chains.run(chain, lambda g: g.pending())
    except (ChainError, ChainUnavailable) as error:
        log.info("the pool of %s is not known: %s", chain, error)
        return set()


async def _look(
    context: JobContext,
    rows: Sequence[ExtrinsicRow],
    parts: Sequence[Sequence[Part]],
    known: Sequence[Inclusion | None],
) -> list[_Seen]:
    return await context.chains.run(rows[0].chain, lambda g: _observe(g, rows, parts, known))


async def _write(context: JobContext, write: Callable[..., Awaitable[None]], *args: object) -> None:
    """One write of the ledger, in a transaction of its own."""
    async with context.database.transaction() as tx:
        await write(tx, *args)
        await tx.commit()


async def _unstall(
    context: JobContext, signer: Signer, row: ExtrinsicRow, chain_nonce: int, held: Claim | JobRow
) -> Gone | None:
    """The signer's next nonce is not landing: submit the bytes recorded for it again (ours,
    when it is ours), or fill it when none of the ledger's can land any more."""
    if chain_nonce == row.nonce:
        submitted = await _submit(context, row)
        if submitted.status == ExtrinsicStatus.DROPPED:
            return Gone(submitted.error or "refused by the pool", live=False)
        return None
    waiting = [
        found
        for found in await context.database.read(
            repository.live_of_signer, row.chain, signer.public_key, from_nonce=chain_nonce
        )
        if found.nonce == chain_nonce and found.data is not None
    ]
    for found in waiting:
        log.info("signer %s: nonce %s submitted again", row.signer[:16], chain_nonce)
        await _submit(context, found)
    if not waiting:
        await fill(context, signer, chain_nonce, held)
    return None


async def fill(context: JobContext, signer: Signer, nonce: int, held: Claim | JobRow) -> None:
    """Spend the signer's nonce ``nonce`` with a filler, if it is still its next free one (a
    signer whose extrinsic at that nonce can never land, with later ones waiting)."""
    async with signing(context, signer) as slot:
        if slot.nonce != nonce:
            return  # taken meanwhile, or spent
        log.warning("signer %s: nonce %s filled", signer.public_key.hex()[:16], nonce)
        row = await slot.sign([Filler()], cost=0, held=held)
    if row.status == ExtrinsicStatus.DROPPED:
        return
    # No job follows a filler: followed here to its fate, else the ledger shows it in flight
    # for ever.
    result = await follow(context, signer, row, [Filler()], held=held)
    if isinstance(result, Landed):
        await _write(
            context, repository.mark_final, row.id, result.block, result.outcome.fee, utcnow()
        )
