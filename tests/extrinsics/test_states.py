"""The ledger's states and transitions (``tessera.extrinsics``), one at a time: an extrinsic goes
signed -> submitted -> included -> final or ends dropped, each statement moving it only from
where it may come from; the signer's slot (its next nonce past those the ledger holds, what it may
spend, the nonces of extrinsics whose era passed); signing, submitting, following to a fate
(landed, spent, expired, its block dropped); a filler; the capacity of an extrinsic. Against the
in-memory chain (tests/jobs)."""

import asyncio
import os
import time
import uuid
from datetime import timedelta

import pytest

from tessera.chain.gateway import Filler, Inclusion, Mint
from tessera.chain.keys import ss58_address
from tessera.extrinsics import fees, repository, service
from tessera.extrinsics.schemas import Costs, Gone, Landed, Signer
from tessera.models import ExtrinsicStatus
from tessera.models.base import utcnow
from tests.jobs.memory_chain import DEPOSITS, DOT, FEE, FEE_PER_PART, fee, signer_of
from tests.jobs.test_worker import add_job, extrinsics, ledger

SIGNED, SUBMITTED, INCLUDED, FINAL, DROPPED = (
    ExtrinsicStatus.SIGNED,
    ExtrinsicStatus.SUBMITTED,
    ExtrinsicStatus.INCLUDED,
    ExtrinsicStatus.FINAL,
    ExtrinsicStatus.DROPPED,
)
ALL = (SIGNED, SUBMITTED, INCLUDED, FINAL, DROPPED)
BLOCK = (7, "0x" + "ab" * 32, 2)
DATA = "0x" + "00" * 8


async def record(
    database, tenant, *, nonce: int, status=SIGNED, **values
) -> repository.ExtrinsicRow:
    """An extrinsic written straight into the ledger."""
    async with database.transaction() as tx:
        row = await repository.add_extrinsic(
            tx,
            {
                "project_id": tenant.project_id,
                "chain": "AssetHub",
                "signer": "aa" * 32,
                "nonce": nonce,
                "call": "System.remark",
                "parts": 1,
                "body": [],
                "cost": 0,
                "data": DATA,
                "tx_hash": "0x" + uuid.uuid4().hex * 2,
                "valid_from": 1,
                "valid_until": 1000,
                "status": status,
                "created_at": utcnow(),
            }
            | values,
        )
        await tx.commit()
    return row


async def write(database, statement, *args) -> None:
    async with database.transaction() as tx:
        await statement(tx, *args)
        await tx.commit()


async def stored(database, row_id: uuid.UUID) -> repository.ExtrinsicRow:
    return (await database.read(repository.extrinsics, [row_id]))[row_id]


def new_signer(tenant, chain=None, funds: int = 0) -> Signer:
    seed = os.urandom(32)
    signer = Signer(tenant.project_id, "AssetHub", signer_of(seed), seed)
    if chain is not None and funds:
        chain.fund(signer.public_key, funds)
    return signer


async def claimed(worker, database, tenant):
    """A claim holding its lease, as a handler holds one while it signs."""
    await add_job(database, tenant, subject=uuid.uuid4().hex)
    claim = await worker.claim()
    assert claim is not None
    return claim


async def until_status(database, row_id: uuid.UUID, status) -> repository.ExtrinsicRow:
    deadline = time.monotonic() + 30
    while (row := await stored(database, row_id)).status != status:
        assert time.monotonic() < deadline, f"never {status}: {row.status}"
        await asyncio.sleep(0.01)
    return row


# What each statement makes of an extrinsic in each state (None: leaves it as it was).
MOVES = {
    "submitted": {SIGNED: SUBMITTED},
    "included": {SIGNED: INCLUDED, SUBMITTED: INCLUDED},
    "final": {SIGNED: FINAL, SUBMITTED: FINAL, INCLUDED: FINAL},
    "unincluded": {INCLUDED: SUBMITTED},
    "dropped": {SIGNED: DROPPED, SUBMITTED: DROPPED, INCLUDED: DROPPED},
}


class TestTransitions:
    @pytest.mark.parametrize("start", ALL, ids=str)
    @pytest.mark.parametrize("move", list(MOVES))
    async def test_each_statement_moves_only_from_where_it_may(self, database, tenant, move, start):
        block = {"block_number": 3, "block_hash": "0x" + "cd" * 32, "block_index": 0}
        before = await record(
            database, tenant, nonce=0, status=start, **(block if start == INCLUDED else {})
        )
        now = utcnow() + timedelta(seconds=5)
        statement, args = {
            "submitted": (repository.mark_submitted, (before.id, now)),
            "included": (repository.mark_included, (before.id, BLOCK, now)),
            "final": (repository.mark_final, (before.id, BLOCK, 1234, now)),
            "unincluded": (repository.mark_unincluded, (before.id, now)),
            "dropped": (repository.mark_dropped, ([before.id], "gone for good", now)),
        }[move]
        await write(database, statement, *args)
        after = await stored(database, before.id)
        moved_to = MOVES[move].get(start)
        if moved_to is None:
            assert after == before
            return
        number, block_hash, index = BLOCK
        expected = before._replace(status=moved_to, updated_at=now)
        if move == "submitted":
            expected = expected._replace(submitted_at=now)
        elif move == "included":
            expected = expected._replace(
                block_number=number, block_hash=block_hash, block_index=index
            )
        elif move == "final":
            expected = expected._replace(
                block_number=number, block_hash=block_hash, block_index=index, fee=1234, data=None
            )
        elif move == "unincluded":
            expected = expected._replace(block_number=None, block_hash=None, block_index=None)
        else:
            expected = expected._replace(error="gone for good", data=None)
        assert after == expected

    async def test_dropping_again_keeps_the_first_reason_and_none_is_no_statement(
        self, database, tenant
    ):
        row = await record(database, tenant, nonce=0)
        await write(database, repository.mark_dropped, [row.id], "first", utcnow())
        dropped = await stored(database, row.id)
        await write(database, repository.mark_dropped, [row.id], "second", utcnow())
        assert await stored(database, row.id) == dropped
        assert dropped.error == "first"
        await write(database, repository.mark_dropped, [], "nothing", utcnow())

    async def test_the_live_extrinsics_of_a_signer_by_nonce(self, database, tenant):
        mine = {
            nonce: await record(database, tenant, nonce=nonce, status=status)
            for nonce, status in (
                (3, SUBMITTED),
                (1, SIGNED),
                (2, FINAL),
                (4, DROPPED),
                (5, INCLUDED),
                (0, SUBMITTED),
            )
        }
        await record(database, tenant, nonce=1, signer="bb" * 32)  # another signer
        await record(database, tenant, nonce=1, chain="WestendAssetHub")  # another chain
        signer = bytes.fromhex("aa" * 32)
        live = await database.read(repository.live_of_signer, "AssetHub", signer)
        assert [row.id for row in live] == [mine[n].id for n in (0, 1, 3, 5)]
        live = await database.read(repository.live_of_signer, "AssetHub", signer, from_nonce=2)
        assert [row.id for row in live] == [mine[3].id, mine[5].id]
        assert await database.read(repository.live_of_signer, "AssetHub", bytes(32)) == []

    async def test_extrinsics_by_id(self, database, tenant):
        first = await record(database, tenant, nonce=0)
        second = await record(database, tenant, nonce=1)
        found = await database.read(repository.extrinsics, [second.id, first.id, uuid.uuid4()])
        assert found == {first.id: first, second.id: second}
        assert await database.read(repository.extrinsics, []) == {}


class TestSlot:
    async def test_the_chains_nonce_and_what_the_signer_may_spend(self, worker, chain, tenant):
        signer = new_signer(tenant, chain, 10 * DOT)
        chain.nonces[signer.public_key] = 4
        async with service.signing(worker.context, signer) as slot:
            assert (slot.nonce, slot.free, slot.pending, slot.existential, slot.expired) == (
                4,
                10 * DOT,
                0,
                DEPOSITS.existential,
                [],
            )
            assert slot.available == 10 * DOT - DEPOSITS.existential

    async def test_the_ledgers_nonces_are_skipped_and_their_costs_pending(
        self, worker, chain, database, tenant
    ):
        signer = new_signer(tenant, chain, 10 * DOT)
        chain.nonces[signer.public_key] = 4
        key = {"signer": signer.public_key.hex()}
        await record(database, tenant, nonce=3, cost=1, **key)  # below the chain's: spent
        await record(database, tenant, nonce=4, status=SUBMITTED, cost=100, **key)
        await record(database, tenant, nonce=5, status=INCLUDED, cost=50, **key)  # paid
        await record(database, tenant, nonce=6, status=DROPPED, cost=20, **key)  # given up
        await record(database, tenant, nonce=7, cost=30, **key)
        async with service.signing(worker.context, signer) as slot:
            assert (slot.nonce, slot.pending, slot.expired) == (6, 130, [])
            assert slot.available == 10 * DOT - 130 - DEPOSITS.existential

    async def test_a_nonce_whose_era_passed_is_taken_again_and_its_extrinsic_dropped(
        self, worker, chain, database, tenant
    ):
        signer = new_signer(tenant, chain, 10 * DOT)
        key = {"signer": signer.public_key.hex()}
        chain.build()  # block 1: an era ending at block 2 cannot land in the next
        old = await record(database, tenant, nonce=0, cost=100, valid_until=2, **key)
        landed = await record(
            database, tenant, nonce=1, status=INCLUDED, valid_until=2, **key
        )  # in a block already: not expired
        claim = await claimed(worker, database, tenant)
        async with service.signing(worker.context, signer) as slot:
            assert (slot.nonce, slot.pending, slot.expired) == (0, 0, [old.id])
            row = await slot.sign([Filler()], cost=0, held=claim)
        assert row.nonce == 0
        was = await stored(database, old.id)
        assert (was.status, was.error, was.data) == (
            DROPPED,
            "its era passed before it landed",
            None,
        )
        assert (await stored(database, landed.id)).status == INCLUDED

    async def test_short_of_funds_says_what_the_signer_holds(self, worker, tenant):
        signer = new_signer(tenant)
        config = worker.context.chains.config("AssetHub")
        slot = service.Slot(worker.context, signer, 0, 5 * DOT, DOT, DEPOSITS.existential, [])
        address = ss58_address(signer.public_key, 0)
        assert slot.short_of_funds("a mint", 2 * DOT) == (
            f"waiting for funds: the project wallet {address} holds 5 DOT on AssetHub, 1 DOT of "
            "it for extrinsics in flight; a mint needs 2 DOT and 0.01 DOT kept"
        )
        idle = service.Slot(worker.context, signer, 0, 5 * DOT, 0, DEPOSITS.existential, [])
        assert idle.short_of_funds("a mint", 2 * DOT) == (
            f"waiting for funds: the project wallet {address} holds 5 DOT on AssetHub; a mint "
            "needs 2 DOT and 0.01 DOT kept"
        )
        assert config.amount(DEPOSITS.existential) == "0.01 DOT"

    async def test_a_signers_lock_is_its_own(self):
        key, other = bytes(32), bytes([1]) + bytes(31)
        lock = service.signer_lock("AssetHub", key)
        assert lock == service.signer_lock("AssetHub", key)
        assert -(2**63) <= lock < 2**63
        assert len({lock, service.signer_lock("WestendAssetHub", key)}) == 2
        assert len({lock, service.signer_lock("AssetHub", other)}) == 2


class TestSignAndSubmit:
    async def test_recorded_then_submitted_and_the_slot_moves_on(
        self, worker, chain, database, tenant
    ):
        signer = new_signer(tenant, chain, 10 * DOT)
        claim = await claimed(worker, database, tenant)
        async with service.signing(worker.context, signer) as slot:
            row = await slot.sign([Filler()], cost=5, held=claim)
            assert (slot.nonce, slot.pending) == (1, 5)
        [signed] = chain.signed
        [applied] = chain.extrinsics
        assert applied.tx.tx_hash == signed.tx_hash == row.tx_hash
        assert (row.status, row.nonce, row.call, row.parts, row.cost, row.data) == (
            SUBMITTED,
            0,
            "System.remark",
            1,
            5,
            signed.extrinsic,
        )
        assert (row.project_id, row.chain, row.signer) == (
            tenant.project_id,
            "AssetHub",
            signer.public_key.hex(),
        )
        assert (row.valid_from, row.valid_until) == (signed.valid_from, signed.valid_until)
        assert row.submitted_at is not None
        assert await stored(database, row.id) == row._replace(updated_at=row.submitted_at)

    async def test_recorded_alone_then_submitted_together(self, worker, chain, database, tenant):
        chain.manual = True
        first, second = new_signer(tenant, chain, DOT), new_signer(tenant, chain, DOT)
        claim = await claimed(worker, database, tenant)
        rows = []
        for signer in (first, second):
            async with service.signing(worker.context, signer) as slot:
                rows.append(await slot.sign([Filler()], cost=0, held=claim, submit=False))
        assert [row.status for row in rows] == [SIGNED, SIGNED] and chain.pool == {}
        shown = await service.submit_all(worker.context, rows)
        assert [row.status for row in shown] == [SUBMITTED, SUBMITTED]
        assert set(chain.pool) == {row.tx_hash for row in rows}
        for row in rows:
            assert (await stored(database, row.id)).status == SUBMITTED
        assert await service.submit_all(worker.context, []) == []

    async def test_refused_for_good_it_is_dropped_and_its_nonce_taken_again(
        self, worker, chain, database, tenant
    ):
        broke = new_signer(tenant)  # cannot pay the fee
        claim = await claimed(worker, database, tenant)
        async with service.signing(worker.context, broke) as slot:
            row = await slot.sign([Filler()], cost=0, held=claim)
        reason = "rejected: the signer cannot pay the fee"
        assert (row.status, row.error, row.data) == (DROPPED, reason, None)
        ledger = await stored(database, row.id)
        assert (ledger.status, ledger.error, ledger.data) == (DROPPED, reason, None)
        async with service.signing(worker.context, broke) as slot:
            assert slot.nonce == 0

    async def test_submitted_together_one_refused_for_good_one_not(
        self, worker, chain, database, tenant
    ):
        chain.manual = True
        funded, broke = new_signer(tenant, chain, DOT), new_signer(tenant)
        claim = await claimed(worker, database, tenant)
        rows = []
        for signer in (funded, broke):
            async with service.signing(worker.context, signer) as slot:
                rows.append(await slot.sign([Filler()], cost=0, held=claim, submit=False))
        shown = await service.submit_all(worker.context, rows)
        reason = "rejected: the signer cannot pay the fee"
        assert [(row.status, row.error) for row in shown] == [
            (SUBMITTED, None),
            (DROPPED, reason),
        ]
        stored_rows = [await stored(database, row.id) for row in rows]
        assert [(row.status, row.error, row.data is None) for row in stored_rows] == [
            (SUBMITTED, None, False),
            (DROPPED, reason, True),
        ]

    async def test_an_unreachable_chain_leaves_them_signed(self, worker, chain, database, tenant):
        chain.manual = True
        signer = new_signer(tenant, chain, DOT)
        claim = await claimed(worker, database, tenant)
        async with service.signing(worker.context, signer) as slot:
            row = await slot.sign([Filler()], cost=0, held=claim, submit=False)
        chain.unreachable = True
        assert await service.submit_all(worker.context, [row]) == [row]
        assert await stored(database, row.id) == row


class TestFollow:
    async def test_landed_in_a_final_block(self, worker, chain, database, tenant):
        signer = new_signer(tenant, chain, DOT)
        claim = await claimed(worker, database, tenant)
        async with service.signing(worker.context, signer) as slot:
            row = await slot.sign([Filler()], cost=0, held=claim)
        result = await service.follow(worker.context, signer, row, [Filler()], held=claim)
        assert isinstance(result, Landed)
        assert result.inclusion == Inclusion(1, chain.block_hash(1), 0)
        assert result.block == (1, chain.block_hash(1), 0)
        assert result.outcome.fee == fee(1)
        assert result.extrinsic == row
        # The fate is the caller's to write, with what it carried.
        assert (await stored(database, row.id)).status == SUBMITTED

    async def test_included_then_final(self, worker, chain, database, tenant):
        chain.hold_finality()
        signer = new_signer(tenant, chain, DOT)
        claim = await claimed(worker, database, tenant)
        async with service.signing(worker.context, signer) as slot:
            row = await slot.sign([Filler()], cost=0, held=claim)
        following = asyncio.create_task(
            service.follow(worker.context, signer, row, [Filler()], held=claim)
        )
        included = await until_status(database, row.id, INCLUDED)
        assert (included.block_number, included.block_hash, included.block_index) == (
            1,
            chain.block_hash(1),
            0,
        )
        assert not following.done()
        chain.release_finality()
        result = await following
        assert isinstance(result, Landed) and result.block == (1, chain.block_hash(1), 0)

    async def test_its_block_dropped_before_it_was_final(self, worker, chain, database, tenant):
        chain.hold_finality()
        signer = new_signer(tenant, chain, DOT)
        claim = await claimed(worker, database, tenant)
        async with service.signing(worker.context, signer) as slot:
            row = await slot.sign([Filler()], cost=0, held=claim)
        following = asyncio.create_task(
            service.follow(worker.context, signer, row, [Filler()], held=claim)
        )
        await until_status(database, row.id, INCLUDED)
        chain.reorg(1)
        assert await following == Gone("its block 1 was dropped before it was final", live=True)
        back = await stored(database, row.id)
        assert (back.status, back.block_number, back.block_hash, back.block_index) == (
            SUBMITTED,
            None,
            None,
            None,
        )
        assert back.data == row.data  # the same bytes, to land again

    async def test_its_nonce_went_to_another_extrinsic(self, worker, chain, database, tenant):
        chain.manual = True
        signer = new_signer(tenant, chain, DOT)
        claim = await claimed(worker, database, tenant)
        async with service.signing(worker.context, signer) as slot:
            row = await slot.sign([Filler()], cost=0, held=claim, submit=False)
        chain.act(signer.seed, Filler())  # the key acts outside Tessera: nonce 0 spent
        result = await service.follow(worker.context, signer, row, [Filler()], held=claim)
        assert result == Gone("its nonce went to another extrinsic", live=False)
        gone = await stored(database, row.id)
        assert (gone.status, gone.error, gone.data) == (
            DROPPED,
            "its nonce went to another extrinsic",
            None,
        )

    async def test_its_era_passed(self, worker, chain, database, tenant):
        signer = new_signer(tenant, chain, DOT)
        claim = await claimed(worker, database, tenant)
        row = await record(
            database,
            tenant,
            nonce=0,
            status=SUBMITTED,
            valid_until=1,
            signer=signer.public_key.hex(),
        )
        result = await service.follow(worker.context, signer, row, [Filler()], held=claim)
        assert result == Gone("its era passed before it landed", live=False)
        gone = await stored(database, row.id)
        assert (gone.status, gone.error) == (DROPPED, "its era passed before it landed")


class TestFill:
    async def test_the_signers_next_nonce_is_spent_and_recorded_final(
        self, worker, chain, database, tenant
    ):
        signer = new_signer(tenant, chain, DOT)
        claim = await claimed(worker, database, tenant)
        await service.fill(worker.context, signer, 0, claim)
        [applied] = chain.extrinsics
        assert (applied.call, applied.tx.nonce) == ("System.remark", 0)
        [row] = await extrinsics(database)
        assert ledger([row]) == [("System.remark", 0, "final", None)]
        assert (row.block_number, row.block_hash, row.block_index, row.fee, row.data) == (
            1,
            chain.block_hash(1),
            0,
            fee(1),
            None,
        )

    async def test_a_nonce_taken_meanwhile_is_left_alone(self, worker, chain, database, tenant):
        signer = new_signer(tenant, chain, DOT)
        claim = await claimed(worker, database, tenant)
        await record(database, tenant, nonce=0, signer=signer.public_key.hex())
        await service.fill(worker.context, signer, 0, claim)  # its next free nonce is 1
        assert chain.extrinsics == [] and chain.signed == []


class TestCapacity:
    async def test_what_fits_one_extrinsic_and_what_it_costs(self, worker, chain, monkeypatch):
        signer = bytes(32)
        shape = Mint(1, 1, signer, "ipfs://x")
        costs = await fees.costs(worker.context, "AssetHub", signer, shape)
        assert costs == Costs(10, FEE - FEE_PER_PART, FEE_PER_PART)
        chain.per_extrinsic = 25
        chain.unreachable = True  # measured once: kept for ten minutes
        assert await fees.capacity(worker.context, "AssetHub", signer, shape) == 10
        chain.unreachable = False
        # Another shape (other metadata's length) is measured on its own; kept no time at all,
        # it is measured again.
        monkeypatch.setattr(fees, "CAPACITY_SECONDS", 0.0)
        other = Mint(1, 2, signer, "ipfs://longer-metadata")
        assert await fees.capacity(worker.context, "AssetHub", signer, other) == 25
        chain.per_extrinsic = 40
        assert await fees.capacity(worker.context, "AssetHub", signer, other) == 40
