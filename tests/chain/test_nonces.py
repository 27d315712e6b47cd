"""Pipelined nonces on the real Asset Hub runtime (Chopsticks): two batches of one signer, the
project wallet, are in flight at once with consecutive nonces before either is in a block, and
both land, final, in the one block built next.

Chopsticks builds no block until the test asks (``blocks_on_demand``): "in flight at once,
before either is in a block" is the chain's state (its best block unchanged, the signer's nonce
not moved, both extrinsics in its pool) and the ledger's, not a matter of timing. The same
story against the in-memory chain is tests/nfts/test_batches.py (TestPipelining)."""

import asyncio
import time
import uuid

import pytest
from sqlalchemy import select

from tessera.chain.extrinsics import parts_of, tx_hash
from tessera.main import make_worker
from tessera.models import Extrinsic, Job
from tests import orm
from tests.chain.conftest import blocks_on_demand
from tests.chain.test_nft import NFT, funded, get_product, nft_product, public_key
from tests.factories import create_users, issue_items, items_of

pytestmark = pytest.mark.chain

HOLDERS = 3  # per batch


async def until(probe, what: str, within: float = 30.0):
    deadline = time.monotonic() + within
    while not (found := await probe()):
        assert time.monotonic() < deadline, f"not within {within} s: {what}"
        await asyncio.sleep(0.05)
    return found


async def ledger(database) -> list[Extrinsic]:
    async with orm.session(database, write=False) as session:
        return list(await session.scalars(select(Extrinsic).order_by(Extrinsic.nonce)))


async def mint_jobs(database) -> list[Job]:
    async with orm.session(database, write=False) as session:
        return list(await session.scalars(select(Job).where(Job.kind == "nft.mint")))


def submitted_mints(database, count: int):
    """A probe: the ledger's ``count`` mint extrinsics, once each is submitted."""

    async def probe() -> list[Extrinsic] | None:
        mints = [row for row in await ledger(database) if row.call == "Nfts.mint"]
        if len(mints) == count and all(row.status == "submitted" for row in mints):
            return mints
        return None

    return probe


def item_ids(row: Extrinsic) -> list[int]:
    return [part.item_id for part in parts_of(row.body)]


class TestPipelinedNonces:
    async def test_two_batches_of_one_signer_are_in_flight_at_once_then_final_in_one_block(
        self, chain_client, chain_app, tenant, devchain, database, gateway, worker
    ):
        wallet = await funded(chain_client, tenant, devchain)
        signer = public_key(wallet["address"])
        product = await nft_product(chain_client, tenant)
        first_holders = await create_users(chain_client, tenant, HOLDERS)
        second_holders = await create_users(chain_client, tenant, HOLDERS)
        assert await worker.run_until_idle() == 1  # the collection: the wallet's nonce 0
        other = make_worker(worker.context, chain_app.state.settings)
        runs: list[asyncio.Task[bool]] = []
        try:
            with blocks_on_demand(devchain) as paused_at:
                # A batch is signed and submitted; the next items come while it waits for its
                # block, and another worker signs them: the signer's next nonce.
                await issue_items(
                    chain_client, tenant, product["id"], *(u["id"] for u in first_holders)
                )
                runs.append(asyncio.create_task(worker.run_one()))
                await until(submitted_mints(database, 1), "the first batch submitted")
                await issue_items(
                    chain_client, tenant, product["id"], *(u["id"] for u in second_holders)
                )
                runs.append(asyncio.create_task(other.run_one()))
                first, second = await until(
                    submitted_mints(database, 2), "the second batch submitted"
                )

                # Both in flight at once, with consecutive nonces of the one signer, and neither
                # in a block: no block was built, the signer's nonce on chain has not moved,
                # and the node's pool holds both.
                assert [
                    (row.signer, row.nonce, item_ids(row), row.status, row.block_number)
                    for row in (first, second)
                ] == [
                    (signer.hex(), 1, [1, 2, 3], "submitted", None),
                    (signer.hex(), 2, [4, 5, 6], "submitted", None),
                ]
                assert devchain.head() == paused_at
                assert gateway.account(signer).nonce == 1
                assert gateway.pending() == {first.tx_hash, second.tx_hash}
                assert [run.done() for run in runs] == [False, False]
                # Two claims, one a batch: each worker's jobs run under its own.
                claims = {job.claim for job in await mint_jobs(database)}
                assert len(claims) == 2 and None not in claims

                built = await asyncio.to_thread(devchain.rpc, "dev_newBlock", [])
                assert await asyncio.wait_for(asyncio.gather(*runs), 60) == [True, True]
        finally:
            for run in runs:
                run.cancel()
            await asyncio.gather(*runs, return_exceptions=True)

        # Both final in that one block, side by side in their nonces' order.
        block = paused_at + 1
        assert [(row.call, row.nonce, row.status) for row in await ledger(database)] == [
            ("Nfts.create", 0, "final"),
            ("Nfts.mint", 1, "final"),
            ("Nfts.mint", 2, "final"),
        ]
        _, first, second = await ledger(database)
        assert gateway.block_hash(block) == built
        assert [(row.block_number, row.block_hash) for row in (first, second)] == [
            (block, built),
            (block, built),
        ]
        landed = devchain.rpc("chain_getBlock", [built])
        assert isinstance(landed, dict)
        hashes = [tx_hash(data) for data in landed["block"]["extrinsics"]]
        assert hashes[first.block_index :] == [first.tx_hash, second.tx_hash]
        assert gateway.account(signer).nonce == 3  # one extrinsic per nonce, none more

        # Each batch's NFTs are recorded from its own extrinsic, and held on chain by their
        # holders.
        rows = await items_of(database, product["id"])
        assert [(r.item_id, r.nft_status, r.nft_tx_hash, r.nft_block) for r in rows] == [
            (n, "minted", (first if n <= HOLDERS else second).tx_hash, block)
            for n in range(1, 2 * HOLDERS + 1)
        ]
        collection_id = (await get_product(chain_client, tenant, product["id"]))["nft"][
            "collection_id"
        ]
        nfts = gateway.collection_items(collection_id)
        holders = [*first_holders, *second_holders]
        assert {n: (nft.owner, nft.metadata) for n, nft in nfts.items()} == {
            n: (public_key(user["wallets"][0]["address"]), NFT["metadata_uri"])
            for n, user in enumerate(holders, start=1)
        }
        jobs = await mint_jobs(database)
        by_claim: dict[uuid.UUID | None, int] = {}
        for job in jobs:
            by_claim[job.claim] = by_claim.get(job.claim, 0) + 1
        assert sorted(by_claim.values()) == [HOLDERS, HOLDERS]
        assert {(job.status, job.attempts) for job in jobs} == {("succeeded", 1)}
