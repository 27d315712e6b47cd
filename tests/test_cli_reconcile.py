"""`tessera chain reconcile`: its table, exit codes and errors, without a chain runtime.

The command is a process of its own that opens the chains its settings name: here Westend
Asset Hub at ws://127.0.0.1:9, where nothing answers. A product whose collection is not created
yet is compared without a chain read (there is nothing on chain to read), which is how the
table, the exit codes and ``--repair`` are checked here; the products are made through the API
with the app's chains behind the in-memory chain. The whole round against the real runtime
(findings, repair by the worker, clean again) is tests/chain/test_cli_reconcile.py.
"""

import asyncio
import subprocess
import uuid
from collections.abc import Iterator
from datetime import timedelta

import pytest
from scalecodec.utils.ss58 import ss58_decode
from sqlalchemy import select, update

from tessera.chain.registry import Chains
from tessera.config import Settings
from tessera.jobs.worker import JobContext
from tessera.main import make_worker
from tessera.models import Job, JobStatus, Product, Reconciliation
from tessera.models.base import utcnow
from tests import orm
from tests.factories import create_product, product_body
from tests.jobs.memory_chain import DOT, MemoryChain
from tests.serving import BIN, settings_env

UNREACHABLE = "ws://127.0.0.1:9"
NFT = {"mint_nft": True, "metadata_uri": "https://meta.example/t.json", "chain": "WestendAssetHub"}


def cli_env(settings: Settings, **chain: object) -> dict[str, str]:
    """The environment of a CLI on the suite's database; ``chain``: more settings."""
    return settings_env(
        settings.database_url,
        env="test",
        secret_keys=settings.secret_keys.get_secret_value(),
        hash_key=settings.hash_key.get_secret_value(),
        **chain,
    )


async def reconcile(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """``tessera chain reconcile ARGS``, in a thread: the test's event loop keeps serving the
    app's connections (SQLite's write lock) meanwhile."""
    return await asyncio.to_thread(
        subprocess.run,
        [str(BIN / "tessera"), "chain", "reconcile", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def table_rows(stdout: str) -> dict[str, list[str]]:
    """The table's lines by product id: each line's cells (a product's cell lines continue on
    the lines after its first)."""
    rows: dict[str, list[str]] = {}
    current = None
    for line in stdout.splitlines():
        if not line.startswith("│"):
            continue
        cells = [cell.strip() for cell in line.strip("│").split("│")]
        current = cells[0] or current
        assert current is not None
        rows.setdefault(current, []).append(" | ".join(cells[1:]).strip(" |"))
    return rows


@pytest.fixture
def env(settings) -> dict[str, str]:
    return cli_env(settings, chain_westendassethub_rpc_url=UNREACHABLE)


@pytest.fixture
def memory(app) -> Iterator[MemoryChain]:
    """The app's chains (a product's balance check, the worker) on an in-memory chain."""
    chain, configured = MemoryChain(), app.state.chains
    # Not monkeypatch: it would delete the attribute of the app's `State` on undo.
    app.state.chains = Chains(app.state.settings, connect=lambda url, timeout: chain)
    yield chain
    app.state.chains = configured


async def nft_product(client, tenant, memory: MemoryChain) -> dict:
    """A mint_nft product whose collection is queued (the worker has not run)."""
    [wallet] = (await client.get("/v1/projects/wallets", headers=tenant.r)).json()
    memory.fund(bytes.fromhex(ss58_decode(wallet["address"])), 100 * DOT)
    response = await client.post("/v1/products", headers=tenant.w, json=product_body(**NFT))
    assert response.status_code == 201, response.text
    assert response.json()["nft"]["status"] == "queued"
    return response.json()


async def waited_since(database, product_id: str, seconds: float) -> None:
    """The product's collection job has waited ``seconds`` (longer than the stuck figure)."""
    async with orm.session(database) as session:
        since = utcnow() - timedelta(seconds=seconds)
        await session.execute(
            update(Product).where(Product.id == uuid.UUID(product_id)).values(updated_at=since)
        )
        await session.commit()


async def collection_jobs(database, product_id: str) -> list[Job]:
    async with orm.session(database, write=False) as session:
        jobs = await session.scalars(select(Job).where(Job.kind == "nft.create_collection"))
        return [job for job in jobs if product_id in job.payload.values()]


async def run_worker(app) -> int:
    """The jobs run on the app's chains (the in-memory one); how many ran."""
    state = app.state
    worker = make_worker(JobContext(state.database, state.box, state.chains), state.settings)
    return await worker.run_until_idle()


class TestReconcile:
    async def test_every_nft_product_of_the_project_checked_clean_exits_0(
        self, env, client, tenant, other, memory, database
    ):
        first = await nft_product(client, tenant, memory)
        second = await nft_product(client, tenant, memory)
        await create_product(client, tenant)  # no NFTs: not checked
        await nft_product(client, other, memory)  # another project's: not checked

        done = await reconcile(env, "--project", str(tenant.project_id))
        assert done.returncode == 0, done.stderr
        assert done.stderr == ""  # no progress bar off a terminal
        assert f"Reconciliation of project {tenant.project_id}" in done.stdout
        assert table_rows(done.stdout) == {first["id"]: ["0 | none"], second["id"]: ["0 | none"]}
        assert "no finding in 2 product(s)" in done.stdout
        async with orm.session(database, write=False) as session:
            recorded = set(await session.scalars(select(Reconciliation.product_id)))
        assert recorded == {uuid.UUID(first["id"]), uuid.UUID(second["id"])}

    async def test_a_finding_exits_1_and_repair_queues_its_action(
        self, env, app, client, tenant, memory, database
    ):
        clean = await nft_product(client, tenant, memory)
        stuck = await nft_product(client, tenant, memory)
        await waited_since(database, stuck["id"], 3600)  # TESSERA_RECONCILE_STUCK_SECONDS: 900

        done = await reconcile(env, "--project", str(tenant.project_id))
        assert done.returncode == 1, done.stderr
        assert done.stderr == ""
        assert table_rows(done.stdout) == {clean["id"]: ["0 | none"], stuck["id"]: ["0 | stuck: 1"]}
        assert "1 finding(s) in 1 of 2 product(s)" in done.stdout
        assert "actions queued" not in done.stdout
        [job] = await collection_jobs(database, stuck["id"])
        assert job.status == JobStatus.QUEUED

        repaired = await reconcile(env, "--project", str(tenant.project_id), "--repair")
        assert repaired.returncode == 1, repaired.stderr  # queued, not done yet
        assert table_rows(repaired.stdout) == {
            clean["id"]: ["0 | none | none"],
            stuck["id"]: ["0 | stuck: 1 | retry: 1"],
        }
        [again] = await collection_jobs(database, stuck["id"])  # the same job, due now
        assert (again.id, again.status) == (job.id, JobStatus.QUEUED)
        assert again.run_after <= utcnow()

        # The worker creates the collection: the product is compared with the chain from now
        # on, and the chain does not answer.
        assert await run_worker(app) == 2
        only = await reconcile(env, "--project", str(tenant.project_id), "--product", clean["id"])
        assert only.returncode == 1
        assert only.stdout == ""
        assert only.stderr.startswith(
            f"error: chain WestendAssetHub is unavailable: cannot reach {UNREACHABLE}"
        )
        assert len(only.stderr.splitlines()) == 1, only.stderr


class TestErrors:
    async def test_an_unreachable_chain_is_one_line_and_exit_1(
        self, env, app, client, tenant, memory
    ):
        product = await nft_product(client, tenant, memory)
        assert await run_worker(app) == 1  # the collection: compared with the chain from now on
        for args in ([], ["--product", product["id"]], ["--repair"]):
            done = await reconcile(env, "--project", str(tenant.project_id), *args)
            assert done.returncode == 1, args
            assert done.stdout == ""
            [line] = done.stderr.splitlines()
            assert line.startswith(
                f"error: chain WestendAssetHub is unavailable: cannot reach {UNREACHABLE}"
            )

    async def test_a_product_without_nfts_is_one_line_and_exit_1(self, env, client, tenant):
        product = await create_product(client, tenant)
        done = await reconcile(env, "--project", str(tenant.project_id), "--product", product["id"])
        assert (done.returncode, done.stdout) == (1, "")
        assert (
            done.stderr == "error: this product does not mint NFTs: there is nothing to reconcile\n"
        )

    async def test_no_such_project_or_product(self, env, tenant, other, client, memory):
        nobody = str(uuid.uuid4())
        done = await reconcile(env, "--project", nobody)
        assert (done.returncode, done.stdout, done.stderr) == (1, "", "error: project not found\n")
        elsewhere = await nft_product(client, other, memory)
        for product_id in (nobody, elsewhere["id"]):
            done = await reconcile(
                env, "--project", str(tenant.project_id), "--product", product_id
            )
            assert (done.returncode, done.stderr) == (1, "error: product not found\n")

    async def test_a_project_without_nft_products_is_clean(self, env, tenant):
        done = await reconcile(env, "--project", str(tenant.project_id))
        assert done.returncode == 0, done.stderr
        assert table_rows(done.stdout) == {}
        assert "no finding in 0 product(s)" in done.stdout
