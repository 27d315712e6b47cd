"""The ledger of signed extrinsics against the in-memory chain: an item is minted once its block
is final; a block dropped before that sends its items back, and the same bytes land again; a
nonce taken and never submitted holds up none of the signer's later extrinsics."""

import asyncio
import uuid

import pytest

from tessera.extrinsics import repository
from tessera.models import ExtrinsicStatus
from tessera.models.base import utcnow
from tests.changes.feed import cursor_now, marker, shown, typed
from tests.jobs.memory_chain import Crash
from tests.jobs.test_worker import (
    expire_leases,
    extrinsics,
    funded,
    jobs,
    ledger,
    nft_product,
    state,
    until_stored,
)
from tests.nfts.test_batches import issued, parts_landed, shown_items
from tests.reconciliation.test_reconciliation import mints


def included(rows) -> bool:
    return [row.status for row in rows] == ["final", "included"]


class TestFinality:
    async def test_an_item_is_submitted_until_its_block_is_final_then_minted(
        self, client, tenant, chain, worker, database
    ):
        await funded(client, tenant, chain)
        product = await nft_product(client, tenant)
        await issued(client, tenant, product, 3)
        assert await worker.run_one()  # the collection
        cursor = await cursor_now(client, tenant)
        chain.hold_finality()
        running = asyncio.create_task(worker.run_one())
        await until_stored(database, included)

        [_, landed] = chain.extrinsics
        assert chain.head().best == 2 and chain.head().finalized == 1
        for item in await shown_items(client, tenant, product):
            assert item["nft"] == {
                "status": "submitted",
                "tx_hash": landed.tx.tx_hash,
                "block": None,
                "block_hash": None,
                "reason": None,
                "transfer": None,
            }
        made = await marker(client, tenant)
        assert typed(await shown(client, tenant, 1, after=cursor)) == [made]  # no nft.minted
        assert not running.done()

        chain.release_finality()
        assert await running
        items = await shown_items(client, tenant, product)
        for item in items:
            assert item["nft"] == {
                "status": "minted",
                "tx_hash": landed.tx.tx_hash,
                "block": 2,
                "block_hash": chain.block_hash(2),
                "reason": None,
                "transfer": None,
            }
        changes = await shown(client, tenant, 4, after=cursor)
        assert typed(changes) == [made] + [("nft.minted", item) for item in items]
        assert ledger(await extrinsics(database)) == [
            ("Nfts.create", 0, "final", None),
            ("Nfts.mint", 1, "final", None),
        ]

    async def test_a_block_dropped_before_it_is_final_sends_its_items_back_then_they_land_once(
        self, client, tenant, chain, worker, database
    ):
        await funded(client, tenant, chain)
        product = await nft_product(client, tenant)
        await issued(client, tenant, product, 3)
        assert await worker.run_one()  # the collection
        chain.hold_finality()
        running = asyncio.create_task(worker.run_one())
        await until_stored(database, included)
        [_, first] = chain.extrinsics
        dropped = chain.block_hash(2)

        chain.reorg(1)
        assert await running
        reason = "its block 2 was dropped before it was final"
        for item in await shown_items(client, tenant, product):
            assert item["nft"] == {
                "status": "queued",
                "tx_hash": first.tx.tx_hash,
                "block": None,
                "block_hash": None,
                "reason": reason,
                "transfer": None,
            }
        mint_jobs = [job for job in await jobs(database) if job.kind == "nft.mint"]
        assert [state(job) for job in mint_jobs] == [("queued", 0, f"waiting: {reason}")] * 3
        [_, back] = await extrinsics(database)
        assert (back.status, back.block_number, back.data is not None) == ("submitted", None, True)
        assert chain.item_owner(0, 1) is None and chain.pool == {}

        chain.release_finality()
        assert await worker.run_until_idle() == 1
        [_, again] = chain.extrinsics
        assert again.tx.data == first.tx.data  # the same bytes, not signed anew
        assert len(chain.signed) == 2 and mints(chain) == [1, 2, 3]
        assert chain.block_hash(2) != dropped
        for item in await shown_items(client, tenant, product):
            assert item["nft"] == {
                "status": "minted",
                "tx_hash": first.tx.tx_hash,
                "block": 2,
                "block_hash": chain.block_hash(2),
                "reason": None,
                "transfer": None,
            }
        assert ledger(await extrinsics(database)) == [
            ("Nfts.create", 0, "final", None),
            ("Nfts.mint", 1, "final", None),
        ]
        mint_jobs = [job for job in await jobs(database) if job.kind == "nft.mint"]
        assert [state(job) for job in mint_jobs] == [("succeeded", 1, None)] * 3


class TestNonceGaps:
    async def test_a_nonce_recorded_and_never_submitted_is_submitted_by_the_next_extrinsic(
        self, client, tenant, chain, worker, database
    ):
        await funded(client, tenant, chain)
        product = await nft_product(client, tenant)
        await issued(client, tenant, product, 20)
        assert await worker.run_one()  # the collection
        chain.crash_before = "submit"  # the first ten recorded with nonce 1, then the worker dies
        with pytest.raises(Crash):
            await worker.run_one()
        assert ledger(await extrinsics(database))[1:] == [("Nfts.mint", 1, "signed", None)]
        assert chain.pool == {} and len(chain.signed) == 2

        # The next ten take nonce 2; following it, the worker finds nonce 1 holding it up and
        # submits the bytes recorded for it: both land.
        assert await worker.run_one()
        assert [applied.tx.nonce for applied in chain.extrinsics] == [0, 1, 2]
        assert len(chain.signed) == 3
        assert [len(items) for items in parts_landed(chain)] == [10, 10]
        statuses = [item["nft"]["status"] for item in await shown_items(client, tenant, product)]
        assert sorted(statuses) == ["minted"] * 10 + ["submitted"] * 10

        await expire_leases(database)  # the first ten's worker is dead: their jobs run again
        assert await worker.run_until_idle() == 1
        assert len(chain.signed) == 3 and sorted(mints(chain)) == list(range(1, 21))
        items = await shown_items(client, tenant, product)
        assert {item["nft"]["status"] for item in items} == {"minted"}
        assert ledger(await extrinsics(database)) == [
            ("Nfts.create", 0, "final", None),
            ("Nfts.mint", 1, "final", None),
            ("Nfts.mint", 2, "final", None),
        ]
        mint_jobs = [job for job in await jobs(database) if job.kind == "nft.mint"]
        assert (
            sorted(state(job) for job in mint_jobs)
            == [("succeeded", 1, None)] * 10 + [("succeeded", 2, None)] * 10
        )

    async def test_a_nonce_whose_bytes_can_never_land_is_filled(
        self, client, tenant, chain, worker, database
    ):
        wallet = await funded(client, tenant, chain)
        product = await nft_product(client, tenant)
        await issued(client, tenant, product, 3)
        assert await worker.run_one()  # the collection
        # Nonce 1, recorded by a run that died, with bytes no pool takes.
        async with database.transaction() as tx:
            hand = await repository.add_extrinsic(
                tx,
                {
                    "project_id": tenant.project_id,
                    "chain": "AssetHub",
                    "signer": wallet.hex(),
                    "nonce": 1,
                    "call": "Nfts.mint",
                    "parts": 1,
                    "body": [],
                    "cost": 0,
                    "data": "0x00",
                    "tx_hash": "0x" + uuid.uuid4().hex * 2,
                    "valid_from": 1,
                    "valid_until": 1000,
                    "status": ExtrinsicStatus.SIGNED,
                    "created_at": utcnow(),
                },
            )
            await tx.commit()

        assert await worker.run_until_idle() == 1
        assert chain.calls == ["Nfts.create", "System.remark", "Utility.force_batch"]
        assert [
            (applied.tx.nonce, block.number)
            for block in chain.blocks
            for applied in block.extrinsics
        ] == [
            (0, 1),
            (1, 2),
            (2, 2),
        ]
        assert mints(chain) == [1, 2, 3]
        rows = {row.id: row for row in await extrinsics(database)}
        assert (rows[hand.id].status, rows[hand.id].error) == (
            "dropped",
            "rejected: invalid.badProof",
        )
        assert sorted(ledger(list(rows.values()))) == [
            ("Nfts.create", 0, "final", None),
            ("Nfts.mint", 1, "dropped", "rejected: invalid.badProof"),
            ("Nfts.mint", 2, "final", None),
            ("System.remark", 1, "final", None),
        ]
        items = await shown_items(client, tenant, product)
        assert {(item["nft"]["status"], item["nft"]["block"]) for item in items} == {("minted", 2)}
