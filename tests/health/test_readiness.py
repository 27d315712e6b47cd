"""``GET /v1/health/ready``: the database, its migrations, a job worker's heartbeat and each
configured chain, checked concurrently; 200 when every check passes, else 503, the same body.

The suite's app has WestendAssetHub configured at a port where nothing listens and no worker in
process; the other apps here are built on the suite's database with one setting changed.
"""

import asyncio
import os
import re
import socket
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import Any

import httpx
from alembic import command
from alembic.script import ScriptDirectory
from fastapi import FastAPI
from sqlalchemy import select, text, update
from sqlalchemy.engine import make_url

from tessera import migrations
from tessera.chain.registry import Chains
from tessera.config import Settings
from tessera.db import Database, database_of
from tessera.health.readiness import Readiness
from tessera.jobs.worker import JobContext, Worker
from tessera.main import create_app, make_worker
from tessera.models import WorkerHeartbeat
from tessera.models.base import utcnow
from tests import orm
from tests.conftest import BACKEND, _worker
from tests.jobs.memory_chain import MemoryChain
from tests.serving import drop_postgres_database, fresh_database

HEAD = ScriptDirectory(str(migrations.HERE)).get_current_head()
assert HEAD is not None
BEFORE_HEAD = ScriptDirectory(str(migrations.HERE)).get_revision(HEAD).down_revision
ALIVE = re.compile(r"1 worker alive, the last beat \d+\.\d s ago")
OK = {"ok": True, "detail": "answers"}
AT_HEAD = {"ok": True, "detail": f"at head {HEAD}"}
NO_WORKER = {"ok": False, "detail": "no worker alive: none has beaten"}


def checks(response: httpx.Response) -> dict[str, Any]:
    """The body with each check's ``ms`` taken out (after checking it is a duration)."""
    body = response.json()
    assert set(body) == {"ready", "checks"}
    every = [*(body["checks"][name] for name in ("database", "migrations", "worker"))]
    every += body["checks"]["chains"].values()
    for check in every:
        assert set(check) == {"ok", "detail", "ms"}
        ms = check.pop("ms")
        assert isinstance(ms, float) and ms >= 0
    return body


def alive(check: dict[str, Any]) -> bool:
    return check["ok"] is True and bool(ALIVE.fullmatch(check["detail"]))


def worker_of(app: FastAPI, database: Database, settings: Settings | None = None) -> Worker:
    state = app.state
    return make_worker(JobContext(database, state.box, state.chains), settings or state.settings)


@asynccontextmanager
async def serving(
    settings: Settings, **changes: Any
) -> AsyncIterator[tuple[FastAPI, httpx.AsyncClient]]:
    """Another app (on the suite's database unless ``database_url`` changes), while it runs."""
    app = create_app(settings.model_copy(update=changes))
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://tessera.test") as http:
            yield app, http


async def heartbeats(database: Database) -> list[str]:
    async with orm.session(database, write=False) as session:
        return list(await session.scalars(select(WorkerHeartbeat.worker_id)))


class TestReadiness:
    async def test_needs_no_credential_and_without_a_worker_is_not_ready(self, client, settings):
        response = await client.get("/v1/health/ready")
        assert response.status_code == 503
        assert checks(response) == {
            "ready": False,
            "checks": {
                "database": OK,
                "migrations": AT_HEAD,
                "worker": NO_WORKER,
                "chains": {"WestendAssetHub": {"ok": False, "detail": "unreachable"}},
            },
        }
        # No connection string, RPC URL or host in an open answer.
        assert settings.chain_westendassethub_rpc_url not in response.text
        assert settings.database_url not in response.text and "127.0.0.1" not in response.text

    async def test_a_beating_worker_passes_and_an_unreachable_chain_still_fails(
        self, app, database, client
    ):
        await worker_of(app, database).heartbeat.beat()
        response = await client.get("/v1/health/ready")
        assert response.status_code == 503
        body = checks(response)
        assert body["ready"] is False
        assert alive(body["checks"]["worker"])
        assert body["checks"]["chains"] == {
            "WestendAssetHub": {"ok": False, "detail": "unreachable"}
        }

    async def test_ready_once_a_worker_has_beaten_and_every_chain_answers(
        self, app, database, settings
    ):
        async with serving(settings) as (other, http):
            memory = MemoryChain()
            other.state.readiness = Readiness(
                other.state.settings,
                database_of(other),
                chains=Chains(other.state.settings, connect=lambda url, timeout: memory),
            )
            assert (await http.get("/v1/health/ready")).status_code == 503  # no worker yet
            await worker_of(app, database).heartbeat.beat()
            response = await http.get("/v1/health/ready")
            assert response.status_code == 200
            body = checks(response)
            assert alive(body["checks"].pop("worker"))
            assert body == {
                "ready": True,
                "checks": {
                    "database": OK,
                    "migrations": AT_HEAD,
                    "chains": {"WestendAssetHub": OK},
                },
            }
            memory.unreachable = True
            response = await http.get("/v1/health/ready")
            assert response.status_code == 503
            assert checks(response)["checks"]["chains"] == {
                "WestendAssetHub": {"ok": False, "detail": "unreachable"}
            }

    async def test_chains_not_configured_are_not_listed(self, app, database, settings):
        await worker_of(app, database).heartbeat.beat()
        async with serving(settings, chain_westendassethub_rpc_url=None) as (_, http):
            response = await http.get("/v1/health/ready")
        assert response.status_code == 200
        body = checks(response)
        assert alive(body["checks"].pop("worker"))
        assert body == {
            "ready": True,
            "checks": {"database": OK, "migrations": AT_HEAD, "chains": {}},
        }

    async def test_a_stale_heartbeat_is_not_a_live_worker(self, app, database, settings):
        worker = worker_of(app, database)
        await worker.heartbeat.beat()
        limit = 3 * settings.worker_heartbeat_seconds  # 15 s
        async with orm.session(database) as session:
            await session.execute(
                update(WorkerHeartbeat).values(beat_at=utcnow() - timedelta(seconds=limit + 1))
            )
            await session.commit()
        async with serving(settings, chain_westendassethub_rpc_url=None) as (_, http):
            response = await http.get("/v1/health/ready")
            assert response.status_code == 503
            assert checks(response)["checks"]["worker"] == {
                "ok": False,
                "detail": "no worker alive: the last beat 16 s ago (limit 15 s)",
            }
            await worker.heartbeat.beat()  # it comes back
            assert (await http.get("/v1/health/ready")).status_code == 200

    async def test_a_chain_that_does_not_answer_fails_within_the_request_timeout(
        self, app, database, settings
    ):
        await worker_of(app, database).heartbeat.beat()
        with socket.socket() as silent:  # accepts connections, never speaks
            silent.bind(("127.0.0.1", 0))
            silent.listen(8)
            url = f"ws://127.0.0.1:{silent.getsockname()[1]}"
            async with serving(
                settings,
                chain_westendassethub_rpc_url=None,
                chain_assethub_rpc_url=url,
                chain_request_timeout_seconds=0.5,
            ) as (_, http):
                for _ in range(2):  # the second waits for the first one's read, still hung
                    started = time.monotonic()
                    response = await http.get("/v1/health/ready")
                    assert time.monotonic() - started < 5  # the chain never answers
                    assert response.status_code == 503
                    body = checks(response)
                    assert body["checks"]["chains"] == {
                        "AssetHub": {"ok": False, "detail": "no answer within 0.5 s"}
                    }
                    assert body["checks"]["database"] == OK and alive(body["checks"]["worker"])
                    assert url not in response.text

    async def test_migrations_behind_head_are_not_ready(self, app, database, settings, tmp_path):
        url = await asyncio.to_thread(fresh_database, BACKEND, tmp_path, f"health_{_worker()}")
        try:
            await asyncio.to_thread(command.downgrade, migrations.config(url), "-1")
            behind = {"database_url": url, "chain_westendassethub_rpc_url": None}
            async with serving(settings, **behind) as (other, http):
                response = await http.get("/v1/health/ready")
                assert response.status_code == 503
                body = checks(response)
                assert body["checks"]["migrations"] == {
                    "ok": False,
                    "detail": f"at {BEFORE_HEAD}, behind head {HEAD}: run `tessera db upgrade`",
                }
                assert body["checks"]["database"] == OK

                async with orm.session(database_of(other)) as session:
                    await session.execute(text("UPDATE alembic_version SET version_num = '9999'"))
                    await session.commit()
                response = await http.get("/v1/health/ready")
                # A newer release's migration (expand only): this process keeps serving.
                assert checks(response)["checks"]["migrations"] == {
                    "ok": True,
                    "detail": f"at 9999, newer than this code's head {HEAD}: restart on the new "
                    "release",
                }

                async with orm.session(database_of(other)) as session:
                    await session.execute(text("DELETE FROM alembic_version"))
                    await session.commit()
                response = await http.get("/v1/health/ready")
                assert checks(response)["checks"]["migrations"] == {
                    "ok": False,
                    "detail": f"not migrated: run `tessera db upgrade` (head is {HEAD})",
                }
        finally:
            if BACKEND == "postgresql":
                base = os.environ["TESSERA_TEST_DATABASE_URL"]
                await drop_postgres_database(base, make_url(url).database or "")

    async def test_refuses_unknown_query_parameters(self, client):
        response = await client.get("/v1/health/ready?verbose=1")
        assert response.status_code == 400
        assert response.json() == {"errors": ["verbose: unknown query parameter"]}

    async def test_is_documented_with_both_answers(self, app):
        operation = app.openapi()["paths"]["/v1/health/ready"]["get"]
        assert "security" not in operation
        answer = {"$ref": "#/components/schemas/ReadinessRead"}
        for status in ("200", "503"):
            assert operation["responses"][status]["content"]["application/json"]["schema"] == (
                answer
            )


class TestWorkerHeartbeat:
    async def test_a_running_worker_beats_and_takes_its_row_away_when_it_stops(
        self, app, database, settings
    ):
        fast = settings.model_copy(update={"worker_heartbeat_seconds": 0.05})
        worker = worker_of(app, database, fast)
        stop = asyncio.Event()
        running = asyncio.create_task(worker.run_forever(stop))
        deadline = time.monotonic() + 5
        while await heartbeats(database) != [worker.worker_id]:
            assert time.monotonic() < deadline, "no heartbeat"
            await asyncio.sleep(0.01)
        async with orm.session(database, write=False) as session:
            first = await session.scalar(select(WorkerHeartbeat.beat_at))
        await asyncio.sleep(0.2)
        async with orm.session(database, write=False) as session:
            row = await session.scalar(select(WorkerHeartbeat))
        assert row.beat_at > first
        assert (row.host, row.pid) == (socket.gethostname(), os.getpid())
        stop.set()
        await running
        assert await heartbeats(database) == []

    async def test_rows_of_workers_silent_for_an_hour_are_deleted(self, app, database):
        dead, live = worker_of(app, database), worker_of(app, database)
        await dead.heartbeat.beat()
        async with orm.session(database) as session:
            await session.execute(
                update(WorkerHeartbeat).values(beat_at=utcnow() - timedelta(hours=1, seconds=1))
            )
            await session.commit()
        await live.heartbeat.beat()
        assert await heartbeats(database) == [live.worker_id]

    async def test_a_deleted_row_is_written_again(self, app, database):
        worker = worker_of(app, database)
        await worker.heartbeat.beat()
        await worker.heartbeat.forget()
        assert await heartbeats(database) == []
        await worker.heartbeat.beat()
        assert await heartbeats(database) == [worker.worker_id]
