"""NFTs at the chain's pace: N NFTs issued through the API and minted on the local Asset Hub
runtime (Chopsticks, Instant mode), then transfers between distinct users mirrored on chain.

``make bench-chain`` (``python -m bench.chain [--nfts 1000 10000] [--transfers 200]``).

Everything goes through a real ``tessera serve`` (its in-process worker, SQLite by default;
``--database-url`` for PostgreSQL, with ``--workers N`` separate ``tessera worker`` processes):
users are created with ``POST /v1/users/create``, items issued with ``POST
/v1/products/{id}/items`` in requests of 50 to 550 users (the most one request takes), the
transfers with ``POST /v1/products/{id}/transfer``. The clock runs from the first issue to the
last NFT minted (its block final); blocks are the chain's head before and after (Instant mode
builds a block as soon as a transaction arrives, holding every transaction waiting), so they
carry over to the live chain, where a block takes 6 to 12 s. The harness reads the database's
item states (no API call per poll) and, at the end, the chain: every NFT is checked to be owned
by its holder's custodial wallet, with the product's metadata.
"""

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import create_engine, text
from substrateinterface import SubstrateInterface

from tessera import migrations
from tessera.chain import devchain as dc
from tessera.chain.gateway import Transfer
from tessera.chain.keys import ss58_address
from tessera.chain.substrate import SubstrateGateway
from tessera.config import Settings

BIN = Path(sys.executable).parent
DOT = 10**10
METADATA = "https://meta.example/bench-ticket.json"
ISSUE_SIZES = (50, 100, 250, 550)  # recipients per issue request, in turn
USERS_PER_REQUEST = 1000
LIVE_BLOCK_SECONDS = (6, 12)


@dataclass
class Run:
    label: str
    nfts: int
    blocks: int
    extrinsics: int
    seconds: float
    # Blocks on the live chain, where a block holds every extrinsic that fits it: the blocks
    # measured for mints (one batch fills a block); for transfers, what their weights need.
    live_blocks: int

    @property
    def per_block(self) -> float:
        return self.nfts / max(self.blocks, 1)


class Tessera:
    """A ``tessera serve`` (and workers) on a database of its own, with one project."""

    def __init__(self, database_url: str, chain_url: str, folder: Path, workers: int) -> None:
        self.folder = folder
        self.port = dc.free_port()
        self.env = {
            **os.environ,
            "TESSERA_DATABASE_URL": database_url,
            "TESSERA_CHAIN_ASSETHUB_RPC_URL": chain_url,
            "TESSERA_PORT": str(self.port),
            "TESSERA_WORKER_IN_PROCESS": "false" if workers else "true",
            "TESSERA_RECONCILE_INTERVAL_SECONDS": "0",
            "TESSERA_ACCESS_LOG": "false",
            "TESSERA_WORKER_POLL_SECONDS": "0.2",
        }
        self.workers = workers
        self.processes: list[subprocess.Popen[bytes]] = []
        self.base = f"http://127.0.0.1:{self.port}"
        self.engine = create_engine(database_url.replace("+aiosqlite", "").replace("+asyncpg", ""))

    def cli(self, *args: str) -> dict[str, object]:
        done = subprocess.run(
            [str(BIN / "tessera"), *args], env=self.env, check=True, capture_output=True
        )
        answer: dict[str, object] = json.loads(done.stdout)
        return answer

    def start(self) -> None:
        self._spawn("serve")
        for _ in range(self.workers):
            self._spawn("worker")
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{self.base}/v1/version", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                time.sleep(0.2)
        raise RuntimeError("tessera serve did not answer")

    def _spawn(self, command: str) -> None:
        log = (self.folder / f"{command}-{len(self.processes)}.log").open("wb")
        self.processes.append(
            subprocess.Popen(
                [str(BIN / "tessera"), command], env=self.env, stdout=log, stderr=subprocess.STDOUT
            )
        )

    def stop(self) -> None:
        for process in self.processes:
            process.terminate()
        for process in self.processes:
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
        self.engine.dispose()

    def states(self, product_id: str, column: str = "nft_status") -> dict[str, int]:
        with self.engine.connect() as connection:
            rows = connection.execute(
                text(
                    f"SELECT {column}, count(*) FROM product_items "  # noqa: S608 - fixed names
                    "WHERE product_id = :product GROUP BY 1"
                ),
                {
                    "product": product_id.replace("-", "")
                    if "sqlite" in str(self.engine.url)
                    else product_id
                },
            ).all()
        return {str(state): count for state, count in rows}

    def extrinsics(self) -> dict[str, int]:
        with self.engine.connect() as connection:
            rows = connection.execute(
                text("SELECT call, count(*) FROM extrinsics GROUP BY call")
            ).all()
        return {str(call): count for call, count in rows}


@contextmanager
def tessera(args: argparse.Namespace, chain_url: str) -> Iterator[Tessera]:
    folder = Path(tempfile.mkdtemp(prefix="tessera-bench-chain-"))
    url = args.database_url or f"sqlite+aiosqlite:///{folder / 'bench.db'}"
    migrations.upgrade(url)
    server = Tessera(url, chain_url, folder, args.workers)
    server.start()
    try:
        yield server
    finally:
        server.stop()
        print(f"(logs in {folder})")


def wait_for(probe: Callable[[], object], what: str, within: float, every: float = 0.5) -> None:
    deadline = time.monotonic() + within
    while True:
        if probe():
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"not within {within:.0f} s: {what}")
        time.sleep(every)


Json = dict[str, Any]


def mint_run(
    server: Tessera, client: httpx.Client, devchain: dc.Devchain, nfts: int
) -> tuple[Run, str, list[Json]]:
    product = client.post(
        "/v1/products",
        json={
            "type": "admission",
            "name": f"Concert of {nfts:,}",
            "price": "10",
            "mint_nft": True,
            "chain": "AssetHub",
            "metadata_uri": METADATA,
            "is_transferable": True,
        },
    ).json()
    product_id = product["id"]
    wait_for(
        lambda: client.get(f"/v1/products/{product_id}").json()["nft"]["status"] == "created",
        "the collection",
        120,
    )
    users: list[Json] = []
    while len(users) < nfts:
        count = min(USERS_PER_REQUEST, nfts - len(users))
        body = [
            {"email": f"u{len(users) + i}-{product_id[-12:]}@example.com"} for i in range(count)
        ]
        created = client.post("/v1/users/create", json=body, timeout=120)
        assert created.status_code in (200, 201), created.text
        users += created.json()["users"]
    head = devchain.head()
    extrinsics_before = sum(server.extrinsics().values())
    started = time.monotonic()
    issued, turn = 0, 0
    while issued < nfts:
        size = min(ISSUE_SIZES[turn % len(ISSUE_SIZES)], nfts - issued)
        ids = [user["id"] for user in users[issued : issued + size]]
        response = client.post(f"/v1/products/{product_id}/items", json={"users": ids}, timeout=120)
        assert response.status_code == 201, response.text
        issued, turn = issued + size, turn + 1

    def minted() -> bool:
        states = server.states(product_id)
        print(f"  {time.monotonic() - started:6.1f} s  {states}", flush=True)
        assert not states.get("failed"), states
        return states.get("minted", 0) == nfts

    wait_for(minted, f"{nfts} NFTs minted", 3600, every=2)
    seconds = time.monotonic() - started
    blocks = devchain.head() - head
    extrinsics = sum(server.extrinsics().values()) - extrinsics_before
    check_on_chain(client, devchain, product_id, nfts, users)
    return Run(f"{nfts:,} NFTs", nfts, blocks, extrinsics, seconds, blocks), product_id, users


def check_on_chain(
    client: httpx.Client, devchain: dc.Devchain, product_id: str, nfts: int, users: list[Json]
) -> None:
    """Every NFT of the product sits in its holder's custodial wallet, with the metadata."""
    collection_id = client.get(f"/v1/products/{product_id}").json()["nft"]["collection_id"]
    gateway = SubstrateGateway(devchain.url)
    try:
        on_chain = gateway.collection_items(collection_id)
    finally:
        gateway.close()
    assert len(on_chain) == nfts, f"{len(on_chain)} NFTs on chain, {nfts} issued"
    wallets = {user["id"]: user["wallets"][0]["address"] for user in users}
    items = all_items(client, product_id)
    assert len(items) == nfts
    for item in items:
        nft = on_chain[item["item_id"]]
        holder = ss58_address(nft.owner, 42)
        assert holder == wallets[item["user"]["id"]], item
        assert nft.metadata == METADATA
        assert item["nft"]["status"] == "minted" and item["nft"]["block"], item


def all_items(client: httpx.Client, product_id: str, limit: int | None = None) -> list[Json]:
    """The product's items, a page of 100 (the most the API gives) at a time."""
    items: list[Json] = []
    page = 1
    while limit is None or len(items) < limit:
        found = client.get(
            f"/v1/products/{product_id}/items", params={"limit": 100, "page": page}
        ).json()["items"]
        if not found:
            break
        items += found
        page += 1
    return items[:limit]


def transfer_run(
    server: Tessera,
    client: httpx.Client,
    devchain: dc.Devchain,
    product_id: str,
    holders: list[Json],
    count: int,
) -> Run:
    body = [{"email": f"r{i}-{product_id[-12:]}@example.com"} for i in range(count)]
    recipients = client.post("/v1/users/create", json=body, timeout=120).json()["users"]
    items = all_items(client, product_id, count)
    head = devchain.head()
    extrinsics_before = sum(server.extrinsics().values())
    started = time.monotonic()
    for item, recipient in zip(items, recipients, strict=True):
        moved = client.post(
            f"/v1/products/{product_id}/transfer",
            json={
                "product_item_id": item["id"],
                "sender_user_id": item["user"]["id"],
                "recipient_user_id": recipient["id"],
            },
        )
        assert moved.status_code == 200, moved.text

    def transferred() -> bool:
        states = server.states(product_id, "nft_transfer_status")
        print(f"  {time.monotonic() - started:6.1f} s  {states}", flush=True)
        assert not states.get("failed"), states
        return states.get("transferred", 0) == count

    wait_for(transferred, f"{count} transfers", 1800, every=1)
    seconds = time.monotonic() - started
    return Run(
        f"{count} transfers, {count} holders",
        count,
        devchain.head() - head,
        sum(server.extrinsics().values()) - extrinsics_before,
        seconds,
        1 + math.ceil(count / transfers_per_block(devchain)),  # the funding, then the transfers
    )


def transfers_per_block(devchain: dc.Devchain) -> int:
    """How many extrinsics of one NFT transfer the normal class of a block holds, by the
    runtime's weights (each with the base weight of an extrinsic)."""
    substrate = SubstrateInterface(url=devchain.url)
    try:
        weights = substrate.get_constant("System", "BlockWeights").value["per_class"]["normal"]
        length = substrate.get_constant("System", "BlockLength").value["max"]["normal"]
    finally:
        substrate.close()
    gateway = SubstrateGateway(devchain.url)
    try:
        weight = gateway.weigh(bytes(32), [Transfer(0, 0, bytes(32))])
    finally:
        gateway.close()
    base, total = weights["base_extrinsic"], weights["max_total"]
    return int(
        min(
            total["ref_time"] // (weight.ref_time + base["ref_time"]),
            total["proof_size"] // max(weight.proof_size + base["proof_size"], 1),
            length // weight.length,
        )
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nfts", type=int, nargs="*", default=[1000, 10000])
    parser.add_argument("--transfers", type=int, default=200)
    parser.add_argument("--database-url", default=None)
    parser.add_argument("--workers", type=int, default=0, help="separate tessera workers")
    args = parser.parse_args()
    settings = Settings()
    cache = dc.cache_path(settings)
    dc.install(cache)
    runs: list[Run] = []
    with (
        dc.Devchain(dc.spec_path(settings), cache) as devchain,
        tessera(args, devchain.url) as server,
    ):
        project = server.cli("project", "create", "--name", "bench-chain")
        headers = {"x-api-key": str(project["api_key"])}
        with httpx.Client(base_url=server.base, headers=headers, timeout=60) as client:
            [wallet] = client.get("/v1/projects/wallets").json()
            devchain.fund(wallet["address"], 800_000 * DOT)
            product_id, holders = "", list[Json]()
            for nfts in args.nfts:
                print(f"{nfts:,} NFTs:", flush=True)
                run, product_id, holders = mint_run(server, client, devchain, nfts)
                runs.append(run)
                print(f"  {run}", flush=True)
            if args.transfers and product_id:
                print(f"{args.transfers} transfers:", flush=True)
                runs.append(
                    transfer_run(server, client, devchain, product_id, holders, args.transfers)
                )
    print()
    print(
        "| run | blocks | extrinsics | per block | wall seconds | live chain: blocks, "
        "at 6 s / 12 s a block |"
    )
    print("|---|---:|---:|---:|---:|---:|")
    for run in runs:
        low, high = (run.live_blocks * s for s in LIVE_BLOCK_SECONDS)
        print(
            f"| {run.label} | {run.blocks} | {run.extrinsics} | {run.per_block:.0f} | "
            f"{run.seconds:.0f} | {run.live_blocks}: {low / 60:.1f} / {high / 60:.1f} min |"
        )


if __name__ == "__main__":
    main()
