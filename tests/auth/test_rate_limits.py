"""Rate limits per credential (TESSERA_RATE_LIMIT_READ / _WRITE): a token bucket each."""

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx
import pytest
from fastapi import FastAPI

from tessera.auth import rate_limits
from tessera.main import create_app
from tests.factories import make_tenant, user_body


class Clock:
    """The buckets' clock (their ``time.time()``), moved by the test alone: how many tokens a
    bucket holds does not depend on how fast a loaded machine answers."""

    def __init__(self) -> None:
        self.now = float(int(time.time()))

    def time(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch) -> Clock:
    frozen = Clock()
    monkeypatch.setattr(rate_limits, "time", frozen)
    return frozen


@asynccontextmanager
async def limited_app(settings, **limits: float) -> AsyncIterator[FastAPI]:
    """Another app (as another process would be) on the suite's database, with limits."""
    app = create_app(settings.model_copy(update=limits))
    async with app.router.lifespan_context(app):
        yield app


def client_of(app: FastAPI) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t.test")


async def statuses(client: httpx.AsyncClient, headers: dict, n: int) -> list[int]:
    return [(await client.get("/v1/products", headers=headers)).status_code for _ in range(n)]


class TestReadLimit:
    async def test_a_burst_of_one_seconds_worth_then_429(self, app, settings, clock):
        async with limited_app(settings, rate_limit_read=3) as limited, client_of(limited) as c:
            tenant = await make_tenant(limited)
            assert await statuses(c, tenant.r, 3) == [200, 200, 200]
            refused = await c.get("/v1/products", headers=tenant.r)
        assert refused.status_code == 429
        assert refused.json() == {
            "message": "rate limit of 3 read requests a second for this credential"
        }
        assert refused.headers["retry-after"] == "1"
        assert refused.headers["ratelimit-limit"] == "3"
        assert refused.headers["ratelimit-remaining"] == "0"
        assert refused.headers["ratelimit-reset"] == "1"

    async def test_another_credential_is_not_slowed(self, app, settings, clock):
        async with limited_app(settings, rate_limit_read=2) as limited, client_of(limited) as c:
            tenant = await make_tenant(limited)
            other = await make_tenant(limited, name="Other")
            assert await statuses(c, tenant.r, 3) == [200, 200, 429]
            assert await statuses(c, tenant.w, 2) == [200, 200]  # another key of the project
            assert await statuses(c, other.r, 2) == [200, 200]

    async def test_refills_and_a_refused_request_takes_no_token(self, app, settings, clock):
        async with limited_app(settings, rate_limit_read=4) as limited, client_of(limited) as c:
            tenant = await make_tenant(limited)
            assert await statuses(c, tenant.r, 4) == [200] * 4
            assert await statuses(c, tenant.r, 6) == [429] * 6
            # A quarter of a second gives one token back; the refusals took none.
            clock.now += 0.3
            assert await statuses(c, tenant.r, 2) == [200, 429]

    async def test_the_401_comes_before_the_limit(self, app, settings):
        async with limited_app(settings, rate_limit_read=1) as limited, client_of(limited) as c:
            for _ in range(3):
                assert (await c.get("/v1/products")).status_code == 401


class TestWriteLimit:
    async def test_writes_have_their_own_bucket(self, app, settings, clock):
        async with (
            limited_app(settings, rate_limit_read=100, rate_limit_write=2) as limited,
            client_of(limited) as c,
        ):
            tenant = await make_tenant(limited)
            created = [
                (await c.post("/v1/users/create", headers=tenant.w, json=[user_body()])).status_code
                for _ in range(3)
            ]
            assert created == [201, 201, 429]
            # Reads (a lookup sent as POST is one) are not held back by the writes.
            profile = await c.post("/v1/users/profile", headers=tenant.w, json={"id": "x"})
            assert profile.status_code == 400
            assert await statuses(c, tenant.w, 2) == [200, 200]

    async def test_documented_when_on(self, app, settings):
        async with limited_app(settings, rate_limit_write=5) as limited:
            operation = limited.openapi()["paths"]["/v1/orders"]["post"]
        assert "429" in operation["responses"]
        assert "429" not in app.openapi()["paths"]["/v1/orders"]["post"]["responses"]


class TestAcrossProcesses:
    async def test_two_processes_share_the_bucket(self, app, settings, clock):
        """On SQLite too: two `tessera serve` processes may share the file."""
        async with (
            limited_app(settings, rate_limit_read=4) as one,
            limited_app(settings, rate_limit_read=4) as two,
            client_of(one) as a,
            client_of(two) as b,
        ):
            tenant = await make_tenant(one)
            results = await statuses(a, tenant.r, 3) + await statuses(b, tenant.r, 3)
        assert results == [200, 200, 200, 200, 429, 429]


class TestOff:
    async def test_no_limit_by_default(self, app, client, tenant):
        assert app.state.settings.rate_limit_read == 0
        assert await statuses(client, tenant.r, 30) == [200] * 30
