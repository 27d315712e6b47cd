"""GET /metrics: who may read it, and what it shows (requests by route template, the job queue,
the pool, the wallet balances), in one process and across `tessera serve --workers 2`."""

import asyncio
import os
import uuid
from datetime import timedelta
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from pydantic import SecretStr
from sqlalchemy import select

from tessera.chain.registry import Chains
from tessera.config import Settings
from tessera.db import database_of
from tessera.instruments.process import MULTIPROC_DIR, multiprocess_directory, sample_pool
from tessera.jobs.queue import enqueue
from tessera.jobs.worker import JobContext
from tessera.main import make_worker
from tessera.metrics.service import wallet_balance_chore
from tessera.models import JobStatus, ProjectWallet
from tessera.models.base import utcnow
from tessera.reconciliation.repository import LastCheck, write_check
from tests import orm
from tests.conftest import BACKEND
from tests.factories import create_product, user_body
from tests.jobs.memory_chain import DOT, MemoryChain
from tests.serving import fresh_database, serve, settings_env

TOKEN = "a-metrics-token-of-32-characters"
NOT_LOCAL = {"message": "metrics answer this host only, unless TESSERA_METRICS_TOKEN is set"}
NO_TOKEN = {"message": "metrics need an Authorization: Bearer header with TESSERA_METRICS_TOKEN"}


def samples(text: str, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    """The samples called ``name`` (``..._total``, ``..._count``), by their sorted labels."""
    return {
        tuple(sorted(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == name
    }


def labels(**values: str) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(values.items()))


async def scrape(client: httpx.AsyncClient) -> str:
    response = await client.get("/metrics")
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
    return response.text


def from_address(app, host: str) -> httpx.AsyncClient:
    transport = httpx.ASGITransport(app=app, client=(host, 40000))
    return httpx.AsyncClient(transport=transport, base_url="http://tessera.test")


@pytest.fixture
def token(app, monkeypatch) -> str:
    monkeypatch.setattr(app.state.settings, "metrics_token", SecretStr(TOKEN))
    return TOKEN


class TestWhoMayRead:
    async def test_a_loopback_client_without_a_token(self, app, client):
        assert (await client.get("/metrics")).status_code == 200  # 127.0.0.1
        async with from_address(app, "::1") as local:
            assert (await local.get("/metrics")).status_code == 200

    @pytest.mark.parametrize("host", ["203.0.113.7", "10.0.0.1", "2001:db8::1"])
    async def test_another_address_without_a_token_is_403(self, app, host):
        async with from_address(app, host) as remote:
            response = await remote.get("/metrics")
        assert response.status_code == 403
        assert response.json() == NOT_LOCAL

    @pytest.mark.parametrize(
        "authorization", [None, "Bearer wrong-token-of-enough-length", f"Basic {TOKEN}", "Bearer"]
    )
    async def test_with_a_token_set_a_missing_or_wrong_one_is_401(
        self, client, token, authorization
    ):
        headers = {"authorization": authorization} if authorization else {}
        response = await client.get("/metrics", headers=headers)  # even from 127.0.0.1
        assert response.status_code == 401
        assert response.json() == NO_TOKEN

    async def test_with_a_token_set_the_right_one_reads_from_anywhere(self, app, token):
        async with from_address(app, "203.0.113.7") as remote:
            response = await remote.get("/metrics", headers={"authorization": f"Bearer {token}"})
        assert response.status_code == 200
        assert "tessera_http_requests_total" in response.text

    def test_a_short_token_is_refused_at_start_up(self):
        with pytest.raises(ValueError, match="metrics_token"):
            Settings(metrics_token="short")

    def test_it_is_not_in_the_openapi(self, app):
        assert "/metrics" not in app.openapi()["paths"]


class TestRequests:
    async def test_counted_by_route_template_method_and_status(self, client, tenant):
        before = await scrape(client)
        ids = [str(uuid.uuid4()) for _ in range(3)]
        for product_id in ids:
            response = await client.get(f"/v1/products/{product_id}", headers=tenant.r)
            assert response.status_code == 404
        assert (await client.get("/v1/products", headers=tenant.r)).status_code == 200
        assert (await client.get("/v1/version")).status_code == 200  # answered before routing
        assert (await client.get("/no/such/path")).status_code == 404
        after = await scrape(client)

        def added(route: str, method: str, status: str) -> float:
            key = labels(route=route, method=method, status=status)
            name = "tessera_http_requests_total"
            return samples(after, name).get(key, 0) - samples(before, name).get(key, 0)

        assert added("/v1/products/{id}", "GET", "404") == 3
        assert added("/v1/products", "GET", "200") == 1
        assert added("/v1/version", "GET", "200") == 1
        assert added("unmatched", "GET", "404") == 1
        assert added("/metrics", "GET", "200") == 1  # the first scrape
        assert not any(product_id in after for product_id in ids)  # never the raw path

        key = labels(route="/v1/products/{id}", method="GET")
        name = "tessera_http_request_duration_seconds_count"
        assert samples(after, name)[key] - samples(before, name).get(key, 0) == 3

    async def test_a_refused_body_is_counted(self, client, tenant):
        before = await scrape(client)
        headers = tenant.w | {"content-length": str(10 * 1024 * 1024)}
        assert (await client.post("/v1/products", headers=headers)).status_code == 413
        after = await scrape(client)
        key = labels(route="unmatched", method="POST", status="413")
        name = "tessera_http_requests_total"
        assert samples(after, name)[key] - samples(before, name).get(key, 0) == 1


async def add_job(
    database, project_id, kind: str, status: JobStatus, *, age: float = 0, last_error=None
) -> None:
    created = utcnow() - timedelta(seconds=age)
    job = {
        "project_id": project_id,
        "kind": kind,
        "subject": f"test:{uuid.uuid4()}",
        "payload": {},
        "status": status,
        "created_at": created,
        "last_error": last_error,
    }
    async with database.transaction() as tx:
        await enqueue(tx, [job])
        await tx.commit()


class TestJobQueue:
    async def test_depth_oldest_age_and_failed_jobs_by_kind(self, client, database, tenant):
        project = tenant.project_id
        await add_job(database, project, "nft.mint", JobStatus.QUEUED, age=120)
        await add_job(database, project, "nft.mint", JobStatus.QUEUED, age=5)
        await add_job(database, project, "nft.transfer", JobStatus.RUNNING, age=30)
        await add_job(database, project, "nft.mint", JobStatus.FAILED, age=600)
        await add_job(database, project, "nft.mint", JobStatus.SUCCEEDED, age=900)

        text = await scrape(client)
        depth = samples(text, "tessera_job_queue_depth")
        assert depth == {
            labels(kind=kind, status=status): count
            for kind, status, count in [
                ("nft.create_collection", "queued", 0),
                ("nft.create_collection", "running", 0),
                ("nft.mint", "queued", 2),
                ("nft.mint", "running", 0),
                ("nft.transfer", "queued", 0),
                ("nft.transfer", "running", 1),
                ("nft.follow", "queued", 0),
                ("nft.follow", "running", 0),
                ("nft.reconcile", "queued", 0),
                ("nft.reconcile", "running", 0),
            ]
        }
        age = samples(text, "tessera_job_queue_oldest_age_seconds")
        assert 120 <= age[labels(kind="nft.mint", status="queued")] < 180
        assert 30 <= age[labels(kind="nft.transfer", status="running")] < 90
        assert age[labels(kind="nft.transfer", status="queued")] == 0
        assert samples(text, "tessera_jobs_failed") == {
            labels(kind="nft.create_collection"): 0,
            labels(kind="nft.mint"): 1,
            labels(kind="nft.transfer"): 0,
            labels(kind="nft.follow"): 0,
            labels(kind="nft.reconcile"): 0,
        }

    async def test_an_empty_queue_shows_zeros(self, client):
        text = await scrape(client)
        assert set(samples(text, "tessera_job_queue_depth").values()) == {0}
        assert set(samples(text, "tessera_jobs_failed").values()) == {0}


class TestWebhooks:
    async def test_deliveries_of_the_last_hour_and_endpoints_by_status(
        self, client, database, tenant
    ):
        from datetime import timedelta

        from sqlalchemy import update

        from tessera.models import WebhookDelivery, WebhookEndpoint
        from tessera.models.base import utcnow

        ids = []
        for _ in range(3):
            created = await client.post(
                "/v1/webhooks", headers=tenant.w, json={"url": "https://93.184.216.34/h"}
            )
            assert created.status_code == 201, created.text
            ids.append(created.json()["id"])
        now = utcnow()
        async with orm.session(database) as session:
            await session.execute(
                update(WebhookEndpoint)
                .where(WebhookEndpoint.id == uuid.UUID(ids[1]))
                .values(failing_since=now)
            )
            await session.execute(
                update(WebhookEndpoint)
                .where(WebhookEndpoint.id == uuid.UUID(ids[2]))
                .values(enabled=False)
            )
            attempts = [
                ("succeeded", now),
                ("succeeded", now - timedelta(minutes=30)),
                ("failed", now),
                ("failed", now - timedelta(hours=2)),  # older than the hour
                ("pending", now),  # a replay not sent yet
            ]
            session.add_all(
                WebhookDelivery(
                    endpoint_id=uuid.UUID(ids[0]),
                    change_id=uuid.uuid4(),
                    change_type="user.created",
                    replay=False,
                    status=status,
                    created_at=at,
                )
                for status, at in attempts
            )
            await session.commit()

        text = await scrape(client)
        assert samples(text, "tessera_webhook_deliveries_last_hour") == {
            labels(status="succeeded"): 2,
            labels(status="failed"): 1,
        }
        assert samples(text, "tessera_webhook_endpoints") == {
            labels(status="enabled"): 1,
            labels(status="failing"): 1,
            labels(status="disabled"): 1,
        }


def finding(kind: str, item_id: int | None = 1) -> dict:
    return {"kind": kind, "item_id": item_id, "database": None, "chain": None}


async def record_check(database, tenant, product_id: str, findings: list[dict]) -> None:
    check = LastCheck(
        product_id=uuid.UUID(product_id),
        project_id=tenant.project_id,
        checked_at=utcnow(),
        items_checked=3,
        findings=findings,
    )
    async with database.transaction() as tx:
        await write_check(tx, check)
        await tx.commit()


DRIFT_KINDS = (
    "missing_on_chain",
    "unexpected_on_chain",
    "owner_mismatch",
    "metadata_mismatch",
    "collection_mismatch",
    "stuck",
)


class TestNftDrift:
    async def test_the_findings_of_every_product_s_last_check_by_kind(
        self, client, database, tenant, other
    ):
        mine, theirs = await create_product(client, tenant), await create_product(client, other)
        await record_check(database, tenant, mine["id"], [finding("stuck", None)])
        # A check replaces the product's last one: only the last one counts.
        await record_check(
            database,
            tenant,
            mine["id"],
            [finding("missing_on_chain", 1), finding("missing_on_chain", 2), finding("stuck", 3)],
        )
        await record_check(
            database,
            other,
            theirs["id"],
            [
                finding("owner_mismatch", 1),
                finding("stuck", 2),
                finding("collection_mismatch", None),
            ],
        )

        drift = samples(await scrape(client), "tessera_nft_drift")
        assert drift == {
            labels(kind="missing_on_chain"): 2,
            labels(kind="unexpected_on_chain"): 0,
            labels(kind="owner_mismatch"): 1,
            labels(kind="metadata_mismatch"): 0,
            labels(kind="collection_mismatch"): 1,
            labels(kind="stuck"): 2,
        }

        # The drift repaired: the next checks find nothing.
        await record_check(database, tenant, mine["id"], [])
        await record_check(database, other, theirs["id"], [])
        drift = samples(await scrape(client), "tessera_nft_drift")
        assert drift == {labels(kind=kind): 0 for kind in DRIFT_KINDS}

    async def test_without_a_check_every_kind_is_at_zero(self, client):
        drift = samples(await scrape(client), "tessera_nft_drift")
        assert drift == {labels(kind=kind): 0 for kind in DRIFT_KINDS}


POOL_GAUGES = ("checked_out", "idle", "size", "overflow", "max_overflow")


class TestDatabasePool:
    async def test_connections_and_waits(self, client, tenant, settings):
        for _ in range(3):
            assert (await client.get("/v1/products", headers=tenant.r)).status_code == 200
        text = await scrape(client)
        gauges = {name: samples(text, f"tessera_db_pool_{name}") for name in POOL_GAUGES}
        waits = samples(text, "tessera_db_pool_wait_seconds_count")
        if BACKEND == "sqlite":  # no pool to report
            assert gauges == {name: {} for name in POOL_GAUGES} and waits == {}
            return
        assert gauges["size"] == {(): settings.db_pool_size}
        assert gauges["max_overflow"] == {(): settings.db_max_overflow}
        assert gauges["overflow"] == {(): 0}
        in_use, idle = gauges["checked_out"][()], gauges["idle"][()]
        assert in_use >= 0 and idle >= 1  # the requests' connections, given back
        assert in_use + idle <= settings.db_pool_size
        assert waits[()] >= 3  # each request's credential check read, and the reads
        buckets = samples(text, "tessera_db_pool_wait_seconds_bucket")
        assert buckets[labels(le="+Inf")] == waits[()]
        assert 0 <= samples(text, "tessera_db_pool_wait_seconds_sum")[()] < waits[()]


class TestSqliteWriter:
    async def test_writes_waiting_for_their_turn_and_their_waits(self, client, tenant, app):
        database = database_of(app)
        before = samples(await scrape(client), "tessera_db_write_wait_seconds_count").get((), 0)

        async def a_write() -> int:
            users = [user_body()]
            response = await client.post("/v1/users/create", headers=tenant.w, json=users)
            return response.status_code

        async with database.transaction():  # the writer's turn, held: the others queue
            writes = [asyncio.create_task(a_write()) for _ in range(3)]
            for _ in range(200):
                sample_pool(database)
                queued = samples(await scrape(client), "tessera_db_writes_waiting")
                if BACKEND == "postgresql" or queued == {(): 3}:
                    break
                await asyncio.sleep(0.01)
        assert await asyncio.gather(*writes) == [201, 201, 201]
        sample_pool(database)
        text = await scrape(client)
        if BACKEND == "postgresql":  # a pool of connections (TestDatabasePool), no writer queue
            # (the gauge exists once any SQLite app of this process has sampled it)
            assert samples(text, "tessera_db_writes_waiting") in ({}, {(): 0})
            return
        assert queued == {(): 3}
        assert samples(text, "tessera_db_writes_waiting") == {(): 0}
        waits = samples(text, "tessera_db_write_wait_seconds_count")[()]
        assert waits >= before + 3  # each of the three, and the credential's usage writes
        assert samples(text, "tessera_db_write_wait_seconds_bucket")[labels(le="+Inf")] == waits


@pytest.fixture
def memory_chain(app) -> tuple[MemoryChain, Chains]:
    memory = MemoryChain()
    # Asset Hub only (the suite's settings configure Westend), at a URL that is never dialled.
    chains = {"chain_assethub_rpc_url": "ws://127.0.0.1:9", "chain_westendassethub_rpc_url": None}
    settings = app.state.settings.model_copy(update=chains)
    return memory, Chains(settings, connect=lambda url, timeout: memory)


class TestWalletBalances:
    async def test_the_worker_chore_records_what_the_scrape_shows(
        self, client, database, tenant, memory_chain
    ):
        memory, chains = memory_chain
        [wallet] = (await client.get("/v1/projects/wallets", headers=tenant.r)).json()
        memory.fund(await _public_key(database, tenant.project_id), 12 * DOT + DOT // 4)
        interval, chore = wallet_balance_chore(chains)
        assert interval == 60
        began = utcnow().timestamp()

        assert await chore(database) == 1
        text = await scrape(client)
        series = labels(
            project_id=str(tenant.project_id), chain="AssetHub", address=wallet["address"]
        )
        assert samples(text, "tessera_project_wallet_balance") == {series: 12.25}
        [read_at] = samples(text, "tessera_project_wallet_balance_read_timestamp_seconds").values()
        assert began <= read_at <= utcnow().timestamp()

        # Within half a minute, another run (another worker's) leaves the reading as it is.
        memory.fund(await _public_key(database, tenant.project_id), DOT)
        assert await chore(database) == 0
        text = await scrape(client)
        assert samples(text, "tessera_project_wallet_balance") == {series: 12.25}

    async def test_an_unreachable_chain_records_nothing(
        self, client, database, tenant, memory_chain
    ):
        memory, chains = memory_chain
        memory.unreachable = True
        _, chore = wallet_balance_chore(chains)
        assert await chore(database) == 0
        assert samples(await scrape(client), "tessera_project_wallet_balance") == {}

    def test_the_job_worker_does_it_every_minute(self, app):
        state = app.state
        context = JobContext(state.database, state.box, state.chains)
        chores = make_worker(context, state.settings).chores
        assert (60.0, "record_wallet_balances") in [(every, c.__name__) for every, c in chores]

    async def test_without_a_configured_chain_there_is_nothing_to_read(self, app, database, tenant):
        settings = app.state.settings.model_copy(update={"chain_westendassethub_rpc_url": None})
        _, chore = wallet_balance_chore(Chains(settings))
        assert await chore(database) == 0


async def _public_key(database, project_id) -> bytes:
    async with orm.session(database, write=False) as session:
        return await session.scalar(
            select(ProjectWallet.public_key).where(ProjectWallet.project_id == project_id)
        )


class TestSeveralProcesses:
    def test_the_directory_is_fresh_for_a_run_and_removed_after(self, monkeypatch):
        monkeypatch.delenv(MULTIPROC_DIR, raising=False)
        with multiprocess_directory(1):
            assert MULTIPROC_DIR not in os.environ
        with multiprocess_directory(2):
            directory = Path(os.environ[MULTIPROC_DIR])
            assert directory.is_dir() and not any(directory.iterdir())
            (directory / "counter_123.db").write_bytes(b"")
        assert MULTIPROC_DIR not in os.environ
        assert not directory.exists()

    def test_every_process_s_requests_are_in_the_figures(self, tmp_path):
        url = fresh_database(BACKEND, tmp_path, "metrics_workers")
        env = settings_env(url, worker_in_process="false")
        with serve(env, tmp_path / "server.log", "--workers", "2") as base:
            processes: set[str] = set()
            sent = 0
            # A new connection each time: the kernel hands them to either process.
            while len(processes) < 2 or sent < 50:
                assert sent < 2000, "one process answered everything"
                response = httpx.get(f"{base}/v1/products", timeout=10)
                assert response.status_code == 401
                processes.add(response.headers["x-request-id"][:16])  # a process's prefix
                sent += 1
            key = labels(route="/v1/products", method="GET", status="401")
            for _ in range(4):  # whichever process answers the scrape
                text = httpx.get(f"{base}/metrics", timeout=10).text
                assert samples(text, "tessera_http_requests_total")[key] == sent
                count = samples(text, "tessera_http_request_duration_seconds_count")
                assert count[labels(route="/v1/products", method="GET")] == sent
                # Each process's pool, added up (none on SQLite).
                size = samples(text, "tessera_db_pool_size")
                waits = samples(text, "tessera_db_pool_wait_seconds_count")
                if BACKEND == "sqlite":
                    assert size == waits == {}
                else:
                    assert size == {(): 2 * Settings.model_fields["db_pool_size"].default}
                    assert waits[()] >= 1
