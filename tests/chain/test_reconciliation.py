"""Reconciliation against the real Asset Hub runtime: the chain is changed behind Tessera's back
(Chopsticks writes pallet-nfts storage), the check reports it and the repair's jobs fix it."""

import asyncio
import signal
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from sqlalchemy import select
from substrateinterface import Keypair, KeypairType, SubstrateInterface

from tessera.chain.keys import ss58_address
from tessera.models import Extrinsic, Job, JobStatus
from tests import orm
from tests.chain import test_nft as nft
from tests.chain.conftest import DOT
from tests.changes.feed import of_type
from tests.factories import (
    create_users,
    issue_items,
    items_of,
    link_receiving,
    row_counts,
    transfer_item,
)
from tests.serving import BIN, settings_env

pytestmark = pytest.mark.chain

PREFIX = 0  # Polkadot Asset Hub's SS58 prefix: the addresses findings show
DRIFTED = "https://drift.example/other.json"
HELD_OUTSIDE = (
    "the NFT of this item sits in a wallet no user of the project holds: the item cannot be "
    "redeemed or transferred until its NFT comes back"
)


class BehindTessera:
    """Storage writes Tessera does not make (``dev_setStorage``), each as pallet-nfts would
    leave the storage: the NFT, its owner's ``Account`` entry and the collection's counters."""

    def __init__(self, devchain, substrate: SubstrateInterface) -> None:
        self.devchain, self.substrate = devchain, substrate

    def _query(self, storage: str, keys: list[Any]) -> Any:
        return self.substrate.query("Nfts", storage, keys).value

    def _write(self, storage: dict[str, list[Any]]) -> None:
        self.devchain.rpc("dev_setStorage", [{"Nfts": storage}])

    def _counted(self, collection_id: int, **changes: int) -> list[Any]:
        """The collection's details with its counters moved by ``changes``."""
        details = self._query("Collection", [collection_id])
        for counter, by in changes.items():
            details[counter] += by
        return [[[collection_id], details]]

    def burn(self, collection_id: int, nft_id: int) -> None:
        """The NFT is gone (as a burn leaves it)."""
        key = [collection_id, nft_id]
        owner = self._query("Item", key)["owner"]
        self._write(
            {
                "Item": [[key, None]],
                "ItemMetadataOf": [[key, None]],
                "ItemConfigOf": [[key, None]],
                "Account": [[[owner, *key], None]],
                "Collection": self._counted(
                    collection_id, items=-1, item_metadatas=-1, item_configs=-1
                ),
            }
        )

    def give(self, collection_id: int, nft_id: int, to: bytes) -> None:
        """The NFT now belongs to ``to`` (as a transfer leaves it)."""
        key = [collection_id, nft_id]
        item = self._query("Item", key)
        dest = ss58_address(to, PREFIX)
        self._write(
            {
                "Item": [[key, item | {"owner": dest, "approvals": []}]],
                "Account": [[[item["owner"], *key], None], [[dest, *key], ()]],
            }
        )

    def set_metadata(self, collection_id: int, nft_id: int, data: str) -> None:
        key = [collection_id, nft_id]
        self._write(
            {"ItemMetadataOf": [[key, self._query("ItemMetadataOf", key) | {"data": data}]]}
        )

    def add(self, collection_id: int, nft_id: int, owner: bytes) -> None:
        """An NFT that no item accounts for, held by ``owner``."""
        key, holder = [collection_id, nft_id], ss58_address(owner, PREFIX)
        item = {"owner": holder, "approvals": [], "deposit": {"account": holder, "amount": 0}}
        self._write(
            {
                "Item": [[key, item]],
                "Account": [[[holder, *key], ()]],
                "Collection": self._counted(collection_id, items=1),
            }
        )


@pytest.fixture
def behind(devchain) -> Iterator[BehindTessera]:
    substrate = SubstrateInterface(url=devchain.url)
    try:
        yield BehindTessera(devchain, substrate)
    finally:
        substrate.close()


def key_of(user: dict) -> bytes:
    return nft.public_key(user["wallets"][0]["address"])


def outsider() -> Keypair:
    """A wallet no project user holds."""
    return Keypair.create_from_uri(f"//{uuid.uuid4().hex}", crypto_type=KeypairType.SR25519)


async def collection_of(client, tenant, product: dict) -> int:
    collection_id = (await nft.get_product(client, tenant, product["id"]))["nft"]["collection_id"]
    assert isinstance(collection_id, int)
    return collection_id


async def reconciliation(client, tenant, product: dict) -> dict:
    response = await client.get(f"/v1/products/{product['id']}/reconciliation", headers=tenant.r)
    assert response.status_code == 200, response.text
    return response.json()


async def repair(client, tenant, product: dict, body: dict | None) -> dict:
    path = f"/v1/products/{product['id']}/reconciliation/repair"
    response = await client.post(path, headers=tenant.w, json=body)
    assert response.status_code == 200, response.text
    return response.json()


def found(shown: dict) -> list[tuple[str, int | None]]:
    return [(finding["kind"], finding["item_id"]) for finding in shown["findings"]]


def planned(answer: dict) -> list[tuple[str, int | None, str]]:
    return [(a["kind"], a["item_id"], a["action"]) for a in answer["actions"]]


async def item_rows(database, product: dict) -> list[tuple[Any, ...]]:
    return [
        (
            i.id,
            i.owner_id,
            i.nft_status,
            i.nft_transfer_status,
            i.nft_wallet_id,
            i.nft_held_by,
            i.updated_at,
        )
        for i in await items_of(database, product["id"])
    ]


async def job_rows(database) -> list[tuple[str, str, JobStatus, int]]:
    async with orm.session(database, write=False) as session:
        jobs = await session.scalars(select(Job).order_by(Job.created_at, Job.id))
        return [(str(j.id), j.kind, j.status, j.attempts) for j in jobs]


class Drifted:
    """A product of four minted items (1-3 Ada's, 4 Bob's), then behind Tessera's back:
    NFT 1 burnt, NFT 2 given to Bob's custodial wallet, NFT 3's metadata changed and NFT 9,
    which no item accounts for, minted to an outsider."""

    def __init__(self, product: dict, collection_id: int, ada: dict, bob: dict, stranger: Keypair):
        self.product, self.collection_id = product, collection_id
        self.ada, self.bob, self.stranger = ada, bob, stranger

    @classmethod
    async def make(cls, client, tenant, devchain, worker, behind) -> "Drifted":
        await nft.funded(client, tenant, devchain)
        product = await nft.nft_product(client, tenant)
        ada, bob = await create_users(client, tenant, 2)
        await issue_items(client, tenant, product["id"], *[ada["id"]] * 3, bob["id"])
        assert await worker.run_until_idle() == 2  # the collection, then its four mints at once
        collection_id = await collection_of(client, tenant, product)
        stranger = outsider()
        behind.burn(collection_id, 1)
        behind.give(collection_id, 2, key_of(bob))
        behind.set_metadata(collection_id, 3, DRIFTED)
        behind.add(collection_id, 9, stranger.public_key)
        return cls(product, collection_id, ada, bob, stranger)

    FINDINGS = [
        ("missing_on_chain", 1),
        ("owner_mismatch", 2),
        ("metadata_mismatch", 3),
        ("unexpected_on_chain", 9),
    ]
    ACTIONS = [
        ("missing_on_chain", 1, "mint"),
        ("owner_mismatch", 2, "transfer_back"),
        ("metadata_mismatch", 3, "set_metadata"),
        ("unexpected_on_chain", 9, "report"),
    ]


@pytest.fixture
async def drifted(chain_client, tenant, devchain, worker, behind) -> Drifted:
    return await Drifted.make(chain_client, tenant, devchain, worker, behind)


class TestReconciliation:
    async def test_reports_exactly_the_four_changes(self, chain_client, tenant, drifted, gateway):
        nfts = gateway.collection_items(drifted.collection_id)  # the chain behind Tessera's back
        assert sorted(nfts) == [2, 3, 4, 9]
        assert (nfts[2].owner, nfts[3].metadata) == (key_of(drifted.bob), DRIFTED)
        assert gateway.item_metadata(drifted.collection_id, 1) is None
        assert gateway.collection(drifted.collection_id).items == 4  # 4 minted, 1 burnt, 1 added

        shown = await reconciliation(chain_client, tenant, drifted.product)
        assert found(shown) == Drifted.FINDINGS
        assert shown["collection_id"] == drifted.collection_id and shown["items_checked"] == 4
        ada, bob = drifted.ada, drifted.bob
        missing, owner, metadata, unexpected = shown["findings"]
        ada_wallet = ss58_address(key_of(ada), PREFIX)
        assert missing["database"] == {
            "nft_status": "minted",
            "user_id": ada["id"],
            "wallet": ada_wallet,
        }
        assert missing["chain"] is None
        assert owner["database"] == {"user_id": ada["id"], "wallet": ada_wallet}
        assert owner["chain"] == {"owner": ss58_address(key_of(bob), PREFIX), "user_id": bob["id"]}
        assert metadata["database"] == {"metadata": nft.NFT["metadata_uri"]}
        assert metadata["chain"] == {"metadata": DRIFTED}
        assert unexpected["database"] is None
        assert unexpected["chain"] == {
            "owner": ss58_address(drifted.stranger.public_key, PREFIX),
            "user_id": None,
            "metadata": None,
        }


class TestRepair:
    async def test_a_dry_run_changes_nothing_and_lists_one_action_per_finding(
        self, chain_client, tenant, drifted, gateway, database
    ):
        await reconciliation(chain_client, tenant, drifted.product)  # recorded (and announced)
        chain_before = gateway.collection_items(drifted.collection_id)
        rows_before = await row_counts(database)
        items_before = await item_rows(database, drifted.product)
        for body in ({"dry_run": True}, None):
            answer = await repair(chain_client, tenant, drifted.product, body)
            assert answer["dry_run"] is True
            assert planned(answer) == Drifted.ACTIONS
            assert [a["job_id"] for a in answer["actions"]] == [None] * 4
            assert [(a["finding"]["kind"], a["finding"]["item_id"]) for a in answer["actions"]] == (
                Drifted.FINDINGS
            )
        assert gateway.collection_items(drifted.collection_id) == chain_before
        assert await row_counts(database) == rows_before
        assert await item_rows(database, drifted.product) == items_before

    async def test_queues_jobs_once_and_the_worker_repairs_all_but_the_unexpected_nft(
        self, chain_client, tenant, drifted, gateway, database, worker
    ):
        answer = await repair(chain_client, tenant, drifted.product, {"dry_run": False})
        assert answer["dry_run"] is False and planned(answer) == Drifted.ACTIONS
        job_ids = {a["item_id"]: a["job_id"] for a in answer["actions"]}
        assert job_ids[9] is None  # reported, never repaired
        assert all(job_ids[n] for n in (1, 2, 3))
        jobs = await job_rows(database)
        queued = {job_id: kind for job_id, kind, status, _ in jobs if status == JobStatus.QUEUED}
        assert queued == {
            job_ids[1]: "nft.mint",
            job_ids[2]: "nft.transfer",
            job_ids[3]: "nft.mint",
        }

        # Called again while they are queued: the same actions and jobs, nothing new.
        rows_before = await row_counts(database)
        again = await repair(chain_client, tenant, drifted.product, {"dry_run": False})
        assert again["actions"] == answer["actions"]
        assert await row_counts(database) == rows_before
        assert await job_rows(database) == jobs

        assert await worker.run_until_idle() == 2  # the two mints at once, the transfer back
        shown = await reconciliation(chain_client, tenant, drifted.product)
        assert found(shown) == [("unexpected_on_chain", 9)]
        collection_id, ada_key = drifted.collection_id, key_of(drifted.ada)
        nfts = gateway.collection_items(collection_id)
        assert sorted(nfts) == [1, 2, 3, 4, 9]
        assert [nfts[n].owner for n in (1, 2, 3)] == [ada_key] * 3  # minted again, moved back
        assert nfts[4].owner == key_of(drifted.bob)
        metadata = nft.NFT["metadata_uri"]
        assert [nfts[n].metadata for n in (1, 2, 3, 4)] == [metadata] * 4
        assert nfts[9].owner == drifted.stranger.public_key
        assert gateway.collection(collection_id).items == 5
        items = await items_of(database, drifted.product["id"])
        assert [(i.nft_status, i.nft_transfer_status) for i in items[:3]] == [
            ("minted", None),
            ("minted", "transferred"),
            ("minted", None),
        ]
        assert all(status == JobStatus.SUCCEEDED for _, _, status, _ in await job_rows(database))


class TestWalletsUsersHold:
    """Where an NFT sat in a wallet its user holds, the chain is the truth: the item follows it."""

    async def test_items_follow_their_nfts_to_a_user_or_are_marked_external(
        self, chain_client, tenant, devchain, worker, gateway, database, behind
    ):
        await nft.funded(chain_client, tenant, devchain)
        product = await nft.nft_product(chain_client, tenant, is_transferable=True)
        ada, bob, cy = await create_users(chain_client, tenant, 3)
        keypair, _ = await link_receiving(chain_client, tenant, ada)
        first, second = await issue_items(chain_client, tenant, product["id"], ada["id"], ada["id"])
        assert await worker.run_until_idle() == 2  # the collection, the two mints
        collection_id = await collection_of(chain_client, tenant, product)

        # Ada moves both NFTs herself, with real signed transfers: one to Bob's wallet, one to
        # a wallet no user of the project holds.
        devchain.fund(keypair.ss58_address, 10 * DOT)
        stranger = outsider()
        nft_transfer(devchain, keypair, collection_id, 1, key_of(bob))
        nft_transfer(devchain, keypair, collection_id, 2, stranger.public_key)
        assert gateway.item_owner(collection_id, 1) == key_of(bob)
        assert gateway.item_owner(collection_id, 2) == stranger.public_key

        shown = await reconciliation(chain_client, tenant, product)
        assert found(shown) == [("owner_mismatch", 1), ("owner_mismatch", 2)]
        held = ss58_address(keypair.public_key, PREFIX)
        assert [f["database"] for f in shown["findings"]] == [
            {"user_id": ada["id"], "wallet": held}
        ] * 2
        assert [f["chain"] for f in shown["findings"]] == [
            {"owner": ss58_address(key_of(bob), PREFIX), "user_id": bob["id"]},
            {"owner": ss58_address(stranger.public_key, PREFIX), "user_id": None},
        ]
        answer = await repair(chain_client, tenant, product, {"dry_run": False})
        assert planned(answer) == [
            ("owner_mismatch", 1, "follow"),
            ("owner_mismatch", 2, "mark_external"),
        ]
        assert all(a["job_id"] for a in answer["actions"])
        assert await worker.run_until_idle() == 2
        assert found(await reconciliation(chain_client, tenant, product)) == []

        # Item 1 is Bob's now: a transfer from the chain, announced like any.
        listed = await chain_client.get(
            f"/v1/products/{product['id']}/items", headers=tenant.r, params={"owner_id": bob["id"]}
        )
        assert [i["item_id"] for i in listed.json()["items"]] == [1]
        transfers = await chain_client.get(
            f"/v1/products/{product['id']}/items/1/transfers", headers=tenant.r
        )
        [moved] = transfers.json()["transfers"]
        assert moved["source"] == "chain"
        assert (moved["from_user"]["id"], moved["to_user"]["id"]) == (ada["id"], bob["id"])
        [shown] = await of_type(chain_client, tenant, "item.transferred")
        change = shown["data"]
        assert change["product_item"]["id"] == first["id"]
        assert change["previous_owner"]["id"] == ada["id"]
        assert change["new_owner"]["id"] == bob["id"]
        [one, two] = await items_of(database, product["id"])
        assert (one.owner_id, one.nft_status) == (uuid.UUID(bob["id"]), "minted")
        assert one.nft_wallet_id == uuid.UUID(bob["wallets"][0]["id"])

        # Item 2 stays Ada's, held outside Tessera: neither redeemed nor transferred.
        assert (two.owner_id, two.nft_status) == (uuid.UUID(ada["id"]), "external")
        assert two.nft_held_by == stranger.public_key.hex() and two.nft_wallet_id is None
        [item] = (
            await chain_client.get(
                f"/v1/products/{product['id']}/items",
                headers=tenant.r,
                params={"owner_id": ada["id"]},
            )
        ).json()["items"]
        assert (item["item_id"], item["nft"]["status"]) == (2, "external")
        before = await row_counts(database)
        redeemed = await chain_client.post(
            f"/v1/products/{product['id']}/items/redeem",
            headers=tenant.w,
            json={"product_item_id": second["id"]},
        )
        moved_on = await transfer_item(chain_client, tenant, product["id"], second["id"], ada, cy)
        for refused in (redeemed, moved_on):
            assert refused.status_code == 409
            assert refused.json() == {"message": HELD_OUTSIDE}
        assert await row_counts(database) == before

        # Its NFT comes back, to Cy's wallet: the item follows it there and is Tessera's again.
        behind.give(collection_id, 2, key_of(cy))
        shown = await reconciliation(chain_client, tenant, product)
        assert found(shown) == [("owner_mismatch", 2)]
        assert shown["findings"][0]["database"] == {
            "user_id": ada["id"],
            "wallet": ss58_address(stranger.public_key, PREFIX),
        }
        answer = await repair(chain_client, tenant, product, {"dry_run": False})
        assert planned(answer) == [("owner_mismatch", 2, "follow")]
        assert await worker.run_until_idle() == 1
        assert found(await reconciliation(chain_client, tenant, product)) == []
        [_, two] = await items_of(database, product["id"])
        assert (two.owner_id, two.nft_status, two.nft_held_by) == (
            uuid.UUID(cy["id"]),
            "minted",
            None,
        )


def nft_transfer(devchain, keypair: Keypair, collection_id: int, nft_id: int, dest: bytes) -> None:
    """A transfer the NFT's holder signs (Tessera holds no key of that wallet)."""
    substrate = SubstrateInterface(url=devchain.url)
    try:
        call = substrate.compose_call(
            "Nfts",
            "transfer",
            {
                "collection": collection_id,
                "item": nft_id,
                "dest": ss58_address(dest, substrate.ss58_format),
            },
        )
        extrinsic = substrate.create_signed_extrinsic(call=call, keypair=keypair)
        receipt = substrate.submit_extrinsic(extrinsic, wait_for_inclusion=True)
        assert receipt.is_success, receipt.error_message
    finally:
        substrate.close()


class WorkerProcess:
    """``tessera worker`` as a real process on the test database and the dev chain."""

    def __init__(self, env: dict[str, str], log) -> None:
        self.env, self.log = env, log
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with self.log.open("ab") as output:
            self.process = subprocess.Popen(
                [str(BIN / "tessera"), "worker"],
                env=self.env,
                stdout=output,
                stderr=subprocess.STDOUT,
            )

    def kill(self) -> None:
        """SIGKILL: no handler runs, nothing is cleaned up."""
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(10)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)


@pytest.fixture
def worker_process(settings, devchain, tmp_path) -> Iterator[Callable[[], WorkerProcess]]:
    env = settings_env(
        settings.database_url,
        env="test",
        secret_keys=settings.secret_keys.get_secret_value(),
        hash_key=settings.hash_key.get_secret_value(),
        chain_assethub_rpc_url=devchain.url,
        chain_timeout_seconds=30,
        job_lease_seconds=4,  # a killed worker's job is claimed again within seconds
        worker_poll_seconds=0.2,
        reconcile_interval_seconds=0,
    )
    started: list[WorkerProcess] = []

    def make() -> WorkerProcess:
        process = WorkerProcess(env, tmp_path / "worker.log")
        started.append(process)
        process.start()
        return process

    yield make
    for process in started:
        process.stop()


class TestCrashSafety:
    async def test_a_worker_killed_in_a_repair_ends_clean_on_restart_with_nothing_minted_twice(
        self, chain_client, tenant, devchain, worker, gateway, database, behind, worker_process
    ):
        await nft.funded(chain_client, tenant, devchain)
        product = await nft.nft_product(chain_client, tenant)
        [ada] = await create_users(chain_client, tenant, 1)
        await issue_items(chain_client, tenant, product["id"], *[ada["id"]] * 3)
        assert await worker.run_until_idle() == 2  # the collection, the three mints
        collection_id = await collection_of(chain_client, tenant, product)
        for nft_id in (1, 2, 3):
            behind.burn(collection_id, nft_id)
        assert gateway.collection(collection_id).items == 0

        answer = await repair(chain_client, tenant, product, {"dry_run": False})
        assert planned(answer) == [("missing_on_chain", n, "mint") for n in (1, 2, 3)]
        job_ids = {a["job_id"] for a in answer["actions"]}

        first = worker_process()

        async def signed() -> Extrinsic | None:
            async with orm.session(database, write=False) as session:
                return await session.scalar(
                    select(Extrinsic).where(
                        Extrinsic.project_id == tenant.project_id,
                        Extrinsic.call == "Nfts.mint",
                        Extrinsic.status.in_(["signed", "submitted"]),
                    )
                )

        batch = await until(signed, 60)  # the three mints, recorded: killed before it is final
        first.kill()
        assert batch.parts == 3
        at_kill = {j[0]: j[2] for j in await job_rows(database) if j[0] in job_ids}
        assert set(at_kill.values()) == {JobStatus.RUNNING}  # the repair was not done

        worker_process()

        async def repaired() -> bool | None:
            statuses = {j[0]: j[2] for j in await job_rows(database) if j[0] in job_ids}
            assert JobStatus.FAILED not in statuses.values()
            return set(statuses.values()) == {JobStatus.SUCCEEDED} or None

        await until(repaired, 60)
        # The jobs the kill interrupted ran again once their lease had passed, and followed the
        # batch that was recorded: it is final, and no other was signed.
        attempts = {j[0]: j[3] for j in await job_rows(database) if j[0] in job_ids}
        assert attempts == dict.fromkeys(job_ids, 2)
        async with orm.session(database, write=False) as session:
            batches = list(
                await session.scalars(
                    select(Extrinsic).where(
                        Extrinsic.project_id == tenant.project_id, Extrinsic.call == "Nfts.mint"
                    )
                )
            )
        repairs = [(b.id, b.status) for b in batches if b.created_at >= batch.created_at]
        assert repairs == [(batch.id, "final")]
        assert found(await reconciliation(chain_client, tenant, product)) == []
        assert gateway.collection(collection_id).items == 3  # each NFT exactly once
        nfts = gateway.collection_items(collection_id)
        assert sorted(nfts) == [1, 2, 3]
        assert {(n.owner, n.metadata) for n in nfts.values()} == {
            (key_of(ada), nft.NFT["metadata_uri"])
        }
        items = await items_of(database, product["id"])
        assert [i.nft_status for i in items] == ["minted"] * 3


async def until(check, seconds: float) -> Any:
    """``check()``'s first truthy answer (it may be a coroutine function), polled every 50 ms
    for at most ``seconds``."""
    deadline = time.monotonic() + seconds
    while True:
        answer = check()
        if asyncio.iscoroutine(answer):
            answer = await answer
        if answer:
            return answer
        assert time.monotonic() < deadline, f"not within {seconds} s"
        await asyncio.sleep(0.05)
