"""The reconciliation at scale: how long ``GET /v1/products/{id}/reconciliation`` takes for a
product of N items against the local Asset Hub runtime (Chopsticks), for a few N.

``make bench-reconcile`` (``python -m bench.reconcile [N ...]``, default 1000 2500 5000).

Only the check is timed (through the ASGI app, three times, the median). What it checks is set
up around the API where going through it would take long and prove nothing new: the users and
their custodial wallets are bulk-inserted (``seed.insert_users``), the items issued through the
products service, and each item's NFT written into the runtime's storage with ``dev_setStorage``
as pallet-nfts leaves it after a mint (the mints themselves are the chain tests' business); the
collection is created by the worker, on chain.
"""

import asyncio
import multiprocessing
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import NamedTuple

import httpx
from bench import seed
from sqlalchemy import bindparam, select, update

from tessera import migrations
from tessera.auth.principal import Principal
from tessera.chain import devchain as dc
from tessera.chain.keys import ss58_address
from tessera.config import Settings
from tessera.db import Database, Rows
from tessera.jobs.worker import JobContext
from tessera.main import create_app, make_worker
from tessera.models import (
    Job,
    JobStatus,
    NftStatus,
    Product,
    ProductItem,
    ProjectWallet,
    UserWallet,
)
from tessera.products import service as products
from tessera.products.item_schemas import ItemsIssue
from tessera.products.schemas import ProductCreate

DOT = 10**10
METADATA = "https://meta.example/bench.json"
ISSUE_BATCH = 500  # items per issue request (the API takes up to 550)
STORAGE_BATCH = 500  # NFTs per dev_setStorage call
ROUNDS = 3


async def measure(devchain: dc.Devchain, url: str, items: int, pool) -> list[float]:
    settings = Settings(
        database_url=url, chain_assethub_rpc_url=devchain.url, worker_in_process=False
    )
    database = Database(url)
    try:
        project, read_key = await seed.new_project(database, settings, "reconcile")
        principal = Principal(project.project_id, True, "bench:reconcile")
        wallet_key, collection_id, product_id = await _product(
            devchain, database, settings, principal
        )
        users = await seed.insert_users(database, project.project_id, items, pool)
        for start in range(0, items, ISSUE_BATCH):
            body = ItemsIssue(users=[uuid.UUID(u) for u in users[start : start + ISSUE_BATCH]])
            await products.issue_items(database, principal, product_id=product_id, body=body)
        owners = await _minted(database, product_id)
        _write_nfts(devchain, collection_id, owners, ss58_address(wallet_key, 0))
    finally:
        await database.dispose()

    app = create_app(settings)
    seconds = []
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://bench") as client:
            for _ in range(ROUNDS):
                started = time.perf_counter()
                response = await client.get(
                    f"/v1/products/{product_id}/reconciliation",
                    headers={"x-api-key": read_key.api_key},
                    timeout=600,
                )
                seconds.append(time.perf_counter() - started)
                answer = response.json()
                assert response.status_code == 200, response.text
                assert (answer["items_checked"], answer["findings"]) == (items, []), answer
    return seconds


class _Wallet(NamedTuple):
    address: str
    public_key: bytes


class _Holder(NamedTuple):
    item: uuid.UUID
    number: int
    wallet: uuid.UUID
    public_key: bytes


class _Collection(NamedTuple):
    nft_collection_id: int | None


_WALLET = select(ProjectWallet.address, ProjectWallet.public_key).where(
    ProjectWallet.project_id == bindparam("project_id")
)
_COLLECTION = select(Product.nft_collection_id).where(Product.id == bindparam("id"))
_HOLDERS = (
    select(
        ProductItem.id.label("item"),
        ProductItem.item_id.label("number"),
        UserWallet.id.label("wallet"),
        UserWallet.public_key,
    )
    .join(UserWallet, UserWallet.user_id == ProductItem.owner_id)
    .where(ProductItem.product_id == bindparam("product_id"))
)
_ITEMS = ProductItem.__table__
_MINTED = (
    update(_ITEMS)
    .where(_ITEMS.c.id == bindparam("item"))
    .values(nft_status=NftStatus.MINTED, nft_wallet_id=bindparam("wallet"))
)
_MINTS_DONE = (
    update(Job.__table__)
    .where(Job.__table__.c.kind == "nft.mint")
    .values(status=JobStatus.SUCCEEDED)
)


async def _project_wallet(rows: Rows, project_id: uuid.UUID) -> _Wallet:
    wallet = await rows.first(_WALLET, _Wallet, project_id=project_id)
    assert wallet is not None
    return wallet


async def _collection_of(rows: Rows, product_id: uuid.UUID) -> int | None:
    found = await rows.first(_COLLECTION, _Collection, id=product_id)
    return None if found is None else found.nft_collection_id


async def _product(devchain, database, settings, principal) -> tuple[bytes, int, uuid.UUID]:
    """A mint_nft product whose collection the worker created on chain (the project wallet
    funded first): the wallet's key, the collection and the product."""
    wallet = await database.read(_project_wallet, principal.project_id)
    devchain.fund(wallet.address, 10_000 * DOT)
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        state = app.state
        body = ProductCreate(
            type="admission",
            name="Bench pass",
            price="0",
            mint_nft=True,
            chain="AssetHub",
            metadata_uri=METADATA,
        )
        created = await products.create_product(
            state.database, principal, chains=state.chains, body=body
        )
        worker = make_worker(JobContext(state.database, state.box, state.chains), settings)
        assert await worker.run_until_idle() == 1
    collection_id = await database.read(_collection_of, created.id)
    assert collection_id is not None
    return wallet.public_key, collection_id, created.id


async def _minted(database: Database, product_id: uuid.UUID) -> dict[int, bytes]:
    """The product's items recorded as minted to their owners' wallets (their mint jobs done):
    each item's number and its owner's public key."""
    async with database.transaction() as tx:
        rows = await tx.all(_HOLDERS, _Holder, product_id=product_id)
        await tx.execute_many(_MINTED, [{"item": r.item, "wallet": r.wallet} for r in rows])
        await tx.execute(_MINTS_DONE)
        await tx.commit()
    return {row.number: row.public_key for row in rows}


def _write_nfts(
    devchain: dc.Devchain, collection_id: int, owners: dict[int, bytes], payer: str
) -> None:
    """Each NFT as a mint and a set_metadata leave pallet-nfts' storage."""
    numbers = sorted(owners)
    for start in range(0, len(numbers), STORAGE_BATCH):
        batch = numbers[start : start + STORAGE_BATCH]
        item, metadata, account = [], [], []
        for number in batch:
            key, holder = [collection_id, number], ss58_address(owners[number], 0)
            deposit = {"account": payer, "amount": DOT // 100}
            item.append([key, {"owner": holder, "approvals": [], "deposit": deposit}])
            meta = {"deposit": {"account": None, "amount": 0}, "data": METADATA}
            metadata.append([key, meta])
            account.append([[holder, *key], ()])
        storage = {"Item": item, "ItemMetadataOf": metadata, "Account": account}
        devchain.rpc("dev_setStorage", [{"Nfts": storage}])


def main(counts: list[int]) -> None:
    settings = Settings()
    cache = dc.cache_path(settings)
    dc.install(cache)
    with dc.Devchain(dc.spec_path(settings), cache) as devchain:
        with multiprocessing.Pool(initializer=seed.init_keys) as pool:
            rows = []
            for count in counts:
                folder = Path(tempfile.mkdtemp(prefix="tessera-reconcile-"))
                url = f"sqlite+aiosqlite:///{folder / 'bench.db'}"
                migrations.upgrade(url)
                seconds = asyncio.run(measure(devchain, url, count, pool))
                median = statistics.median(seconds)
                rows.append((count, median, seconds))
                print(
                    f"{count} items: {median:.2f} s (runs {', '.join(f'{s:.2f}' for s in seconds)})"
                )
    print("\n| items | check, median of 3 | per 1,000 items |\n|---:|---:|---:|")
    for count, median, _ in rows:
        print(f"| {count:,} | {median:.2f} s | {median / count * 1000:.2f} s |")


if __name__ == "__main__":
    main([int(arg) for arg in sys.argv[1:]] or [1000, 2500, 5000])
