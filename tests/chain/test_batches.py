"""NFTs at the chain's pace, on the real Asset Hub runtime (Chopsticks in Instant mode: a block
is built as soon as an extrinsic arrives, holding every extrinsic waiting): a product's mints
go in batches as large as the runtime's weights allow, several in flight at once; an item is
minted once its block is final, and a block dropped before that sends its items back to the
queue; the transfers of many holders are signed and submitted together.

The throughput runs (1,000 NFTs, many holders) measure the runtime, not the database: they run
once, on SQLite (the two-worker run on PostgreSQL is in test_worker_crashes)."""

import asyncio
import time
from contextlib import asynccontextmanager

import pytest
from sqlalchemy import select

from tessera.chain.gateway import Head
from tessera.jobs.worker import JobContext
from tessera.main import make_worker
from tessera.models import Extrinsic
from tests import orm
from tests.chain.conftest import DOT
from tests.chain.test_nft import funded, get_product, nft_product, public_key
from tests.conftest import BACKEND
from tests.factories import create_users, issue_items, items_of, transfer_item

pytestmark = pytest.mark.chain

METADATA = "https://meta.example/ticket.json"
ISSUE_SIZES = (50, 100, 250, 550)  # recipients per request, in turn (550: the most it takes)
USERS_PER_REQUEST = 400  # the tests' bodies are at most 256 KiB
once = pytest.mark.skipif(
    BACKEND != "sqlite", reason="a throughput run of the runtime: once, on the SQLite pass"
)


@asynccontextmanager
async def running_worker(chain_app, **settings):
    """The worker ``tessera serve`` runs (its slots, its batches' gathering), in this loop."""
    state = chain_app.state
    worker = make_worker(
        JobContext(state.database, state.box, state.chains),
        state.settings.model_copy(update=settings),
    )
    stop = asyncio.Event()
    task = asyncio.create_task(worker.run_forever(stop))
    try:
        yield worker
    finally:
        stop.set()
        await task


async def until(probe, what: str, within: float):
    deadline = time.monotonic() + within
    while not (found := await probe()):
        assert time.monotonic() < deadline, f"not within {within} s: {what}"
        await asyncio.sleep(0.2)
    return found


async def ledger(database) -> list[Extrinsic]:
    async with orm.session(database, write=False) as session:
        return list(await session.scalars(select(Extrinsic).order_by(Extrinsic.created_at)))


async def many_users(client, tenant, count: int) -> list[dict]:
    users: list[dict] = []
    while len(users) < count:
        users += await create_users(client, tenant, min(USERS_PER_REQUEST, count - len(users)))
    return users


class TestThroughput:
    @once
    async def test_1000_nfts_issued_in_requests_of_50_to_550_take_at_most_10_blocks(
        self, chain_client, chain_app, tenant, devchain, database, gateway
    ):
        await funded(chain_client, tenant, devchain, amount=1000 * DOT)
        product = await nft_product(chain_client, tenant)
        holders = await many_users(chain_client, tenant, 1000)
        # As `tessera serve` runs it: batches gathered for a second of quiet, up to 6 s.
        async with running_worker(
            chain_app, job_batch_gather_seconds=1.0, job_batch_max_wait_seconds=6.0
        ):

            async def created() -> bool:
                shown = await get_product(chain_client, tenant, product["id"])
                return shown["nft"]["status"] == "created"

            await until(created, "the collection", 60)
            collection_id = (await get_product(chain_client, tenant, product["id"]))["nft"][
                "collection_id"
            ]
            before = devchain.head()
            issued, turn = 0, 0
            while issued < 1000:
                size = min(ISSUE_SIZES[turn % len(ISSUE_SIZES)], 1000 - issued)
                chunk = holders[issued : issued + size]
                await issue_items(chain_client, tenant, product["id"], *(u["id"] for u in chunk))
                issued, turn = issued + size, turn + 1

            async def all_minted() -> bool:
                rows = await items_of(database, product["id"])
                assert not [r for r in rows if r.nft_status == "failed"]
                return all(r.nft_status == "minted" for r in rows)

            await until(all_minted, "1,000 NFTs minted", 180)
        blocks = devchain.head() - before
        assert blocks <= 10, f"{blocks} blocks for 1,000 NFTs"
        batches = [e for e in await ledger(database) if e.call == "Nfts.mint"]
        assert sum(e.parts for e in batches) == 1000 and len(batches) <= blocks
        assert {e.status for e in batches} == {"final"}
        nfts = gateway.collection_items(collection_id)
        assert sorted(nfts) == list(range(1, 1001))
        wallets = {u["id"]: public_key(u["wallets"][0]["address"]) for u in holders}
        for row in await items_of(database, product["id"]):
            assert (nfts[row.item_id].owner, nfts[row.item_id].metadata) == (
                wallets[str(row.owner_id)],
                METADATA,
            )

    @once
    async def test_the_transfers_of_many_holders_land_side_by_side(
        self, chain_client, chain_app, tenant, devchain, database, gateway, worker
    ):
        await funded(chain_client, tenant, devchain)
        product = await nft_product(chain_client, tenant, is_transferable=True)
        senders = await many_users(chain_client, tenant, 12)
        recipients = await many_users(chain_client, tenant, 12)
        items = await issue_items(chain_client, tenant, product["id"], *(u["id"] for u in senders))
        assert await worker.run_until_idle() == 2  # the collection, the 12 mints at once
        for item, sender, recipient in zip(items, senders, recipients, strict=True):
            moved = await transfer_item(
                chain_client, tenant, product["id"], item["id"], sender, recipient
            )
            assert moved.status_code == 200, moved.text
        before = devchain.head()
        assert await worker.run_until_idle() == 1  # the 12 transfers, one claim
        blocks = devchain.head() - before
        collection_id = (await get_product(chain_client, tenant, product["id"]))["nft"][
            "collection_id"
        ]
        nfts = gateway.collection_items(collection_id)
        for item, recipient in zip(items, recipients, strict=True):
            assert nfts[item["item_id"]].owner == public_key(recipient["wallets"][0]["address"])
        moved = [e for e in await ledger(database) if e.call == "Nfts.transfer"]
        funds = [e for e in await ledger(database) if e.call == "Balances.transfer_keep_alive"]
        # One funding of the 12 holders by the project wallet; each holder signed its own.
        assert [(e.parts, e.status) for e in funds] == [(12, "final")]
        assert len({e.signer for e in moved}) == 12 and {e.status for e in moved} == {"final"}
        # Submitted together, at once (a live chain puts them in one block; Chopsticks in
        # Instant mode builds a block for each extrinsic as it arrives).
        assert len({e.submitted_at for e in moved}) == 1 and blocks <= 13
        rows = await items_of(database, product["id"])
        assert {(r.nft_transfer_status, r.nft_transfer_block is not None) for r in rows} == {
            ("transferred", True)
        }
        # Done again, nothing moves: the chain agrees, and no holder is funded twice.
        balances = {
            s["id"]: gateway.balance(public_key(s["wallets"][0]["address"])) for s in senders
        }
        assert await worker.run_until_idle() == 0
        assert balances == {
            s["id"]: gateway.balance(public_key(s["wallets"][0]["address"])) for s in senders
        }


class HeldFinality:
    """The real gateway, except that the chain's finalized head stays at ``final`` while a test
    holds it there (the live chain finalizes a few blocks behind its best one)."""

    def __init__(self, gateway) -> None:
        self._gateway = gateway
        self.final: int | None = None

    def __getattr__(self, name: str):
        return getattr(self._gateway, name)

    def head(self) -> Head:
        head = self._gateway.head()
        if self.final is None:
            return head
        return Head(best=head.best, finalized=min(head.finalized, self.final))


class TestFinality:
    async def test_a_block_dropped_before_it_is_final_sends_its_items_back_then_once(
        self, chain_client, chain_app, tenant, devchain, database, gateway, worker
    ):
        await funded(chain_client, tenant, devchain)
        product = await nft_product(chain_client, tenant)
        holders = await create_users(chain_client, tenant, 3)
        assert await worker.run_until_idle() == 1  # the collection
        held = HeldFinality(gateway)
        chains = chain_app.state.chains
        chains.gateways["AssetHub"] = held
        try:
            held.final = devchain.head()
            await issue_items(chain_client, tenant, product["id"], *(u["id"] for u in holders))
            minting = asyncio.create_task(worker.run_one())

            async def included() -> Extrinsic | None:
                found = [e for e in await ledger(database) if e.call == "Nfts.mint"]
                return found[0] if found and found[0].status == "included" else None

            first = await until(included, "the batch in a block", 30)
            items = await items_of(database, product["id"])
            assert {i.nft_status for i in items} == {"submitted"}  # in a block, not final
            listed = await chain_client.get(f"/v1/products/{product['id']}/items", headers=tenant.r)
            assert {i["nft"]["status"] for i in listed.json()["items"]} == {"submitted"}

            # The block is dropped (a fork the chain did not finalize); the extrinsic with it.
            devchain.rpc("dev_setHead", [first.block_number - 1])
            assert await asyncio.wait_for(minting, 30)
            items = await items_of(database, product["id"])
            reason = f"its block {first.block_number} was dropped before it was final"
            assert {(i.nft_status, i.nft_reason) for i in items} == {("queued", reason)}

            # Claimed again: the same signed bytes are submitted again, never signed anew.
            minting = asyncio.create_task(worker.run_one())

            async def included_again() -> Extrinsic | None:
                [again] = [e for e in await ledger(database) if e.call == "Nfts.mint"]
                return again if again.status == "included" else None

            again = await until(included_again, "the same batch in a new block", 30)
            assert (again.id, again.tx_hash) == (first.id, first.tx_hash)
            held.final = None  # the chain finalizes it
            assert await asyncio.wait_for(minting, 30)
        finally:
            chains.gateways["AssetHub"] = gateway
        [final] = [e for e in await ledger(database) if e.call == "Nfts.mint"]
        assert final.status == "final" and final.block_hash == gateway.block_hash(
            final.block_number
        )
        items = await items_of(database, product["id"])
        assert {(i.nft_status, i.nft_block, i.nft_block_hash) for i in items} == {
            ("minted", final.block_number, final.block_hash)
        }
        collection_id = (await get_product(chain_client, tenant, product["id"]))["nft"][
            "collection_id"
        ]
        assert gateway.collection(collection_id).items == 3  # each NFT once
