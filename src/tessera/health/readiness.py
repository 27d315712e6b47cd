"""The checks behind ``GET /v1/health/ready`` (``tessera.health.router``), concurrently, each
within ``chain_request_timeout_seconds``, so the answer comes within that time whatever hangs.

A check's ``detail`` is in words of our own: never a URL, a host or a driver's message, which
may carry a secret (an RPC provider's key in its URL) or map the network. The cause goes to the
log.
"""

import asyncio
import logging
import time
from collections.abc import Awaitable
from datetime import timedelta
from typing import Annotated

from fastapi import Depends, Request
from pydantic import Field

from tessera import migrations
from tessera.chain.gateway import ChainError, ChainUnreachable, Deposits
from tessera.chain.registry import Chains
from tessera.config import Chain, Settings
from tessera.db import Database
from tessera.db.health import ping, schema_versions
from tessera.jobs import heartbeat
from tessera.models.base import utcnow
from tessera.schemas import SnakeModel

log = logging.getLogger("tessera.health")

# A worker is alive while its last beat is younger than this many of its intervals.
STALE_AFTER_BEATS = 3

Outcome = tuple[bool, str]


class CheckRead(SnakeModel):
    ok: bool
    detail: str = Field(description="What the check found, in a few words.")
    ms: float = Field(description="How long the check took, in milliseconds.")


class ChecksRead(SnakeModel):
    database: CheckRead = Field(description="The database answers a query.")
    migrations: CheckRead = Field(
        description="The database's schema is at the migration this code expects (its head), "
        "or at a newer release's (migrations only add, so this process serves until restarted)."
    )
    worker: CheckRead = Field(
        description="Some job worker is alive: one has beaten within the last three "
        "TESSERA_WORKER_HEARTBEAT_SECONDS."
    )
    chains: dict[Chain, CheckRead] = Field(
        description="Each configured chain answers a read (chains not configured are not listed)."
    )


class ReadinessRead(SnakeModel):
    ready: bool = Field(description="Every check passed.")
    checks: ChecksRead


class Readiness:
    """The checks of one process: the migration head read once, at start-up, and gateways of
    its own to the chains. A gateway runs one call at a time, so a probe on the gateways the
    requests and the worker share would queue behind a job's slow chain call."""

    def __init__(self, settings: Settings, database: Database, *, chains: Chains | None = None):
        self.settings = settings
        self.database = database
        self.chains = chains or Chains(settings)
        self.timeout = settings.chain_request_timeout_seconds
        self.stale_after = STALE_AFTER_BEATS * settings.worker_heartbeat_seconds
        self.head = migrations.head()
        self.revisions = migrations.revisions()
        # A chain's read in flight: a later probe waits for it instead of starting another, so
        # a hung chain holds one thread, however often the probe is called.
        self._reads: dict[str, asyncio.Future[Deposits]] = {}

    async def check(self) -> ReadinessRead:
        """Every check, concurrently; ready when each passes."""
        names = [chain.name for chain in self.settings.configured_chains()]
        database, schema, worker, *chains = await asyncio.gather(
            self._timed("database", self._database()),
            self._timed("migrations", self._migrations()),
            self._timed("worker", self._worker()),
            *(self._timed(f"chain {name}", self._chain(name)) for name in names),
        )
        checks = ChecksRead(
            database=database,
            migrations=schema,
            worker=worker,
            chains=dict(zip(names, chains, strict=True)),
        )
        ready = all(check.ok for check in (database, schema, worker, *chains))
        return ReadinessRead(ready=ready, checks=checks)

    async def close(self) -> None:
        await asyncio.to_thread(self.chains.close)

    async def _timed(self, name: str, check: Awaitable[Outcome]) -> CheckRead:
        started = time.perf_counter()
        try:
            ok, detail = await asyncio.wait_for(check, self.timeout)
        except TimeoutError:
            ok, detail = False, f"no answer within {self.timeout:g} s"
            log.warning("readiness: %s: no answer within %g s", name, self.timeout)
        except Exception as exc:
            ok, detail = False, f"failed ({type(exc).__name__})"
            log.warning("readiness: %s failed", name, exc_info=True)
        ms = round((time.perf_counter() - started) * 1000, 1)
        return CheckRead(ok=ok, detail=detail, ms=ms)

    async def _database(self) -> Outcome:
        await self.database.read(ping)
        return True, "answers"

    async def _migrations(self) -> Outcome:
        versions = await self.database.read(schema_versions)
        if versions == [self.head]:
            return True, f"at head {self.head}"
        if not versions:
            return False, f"not migrated: run `tessera db upgrade` (head is {self.head})"
        at = ", ".join(sorted(versions))
        if all(version in self.revisions for version in versions):
            return False, f"at {at}, behind head {self.head}: run `tessera db upgrade`"
        # A newer release migrated the database: migrations only add (docs/upgrades.md), so
        # this process serves on it until it is restarted, and a probe must not drop it first.
        return True, f"at {at}, newer than this code's head {self.head}: restart on the new release"

    async def _worker(self) -> Outcome:
        now = utcnow()
        since = now - timedelta(seconds=self.stale_after)
        last, beating = await self.database.read(heartbeat.freshest, since)
        if last is None:
            return False, "no worker alive: none has beaten"
        age = max((now - last).total_seconds(), 0.0)
        limit = f"{self.stale_after:g} s"
        if not beating:
            return False, f"no worker alive: the last beat {age:.0f} s ago (limit {limit})"
        workers = "1 worker" if beating == 1 else f"{beating} workers"
        return True, f"{workers} alive, the last beat {age:.1f} s ago"

    async def _chain(self, name: str) -> Outcome:
        read = self._reads.get(name)
        if read is None or read.done():
            read = self._reads[name] = asyncio.ensure_future(asyncio.to_thread(self._read, name))
            read.add_done_callback(_seen)
        try:
            await asyncio.shield(read)
        except ChainUnreachable as exc:
            log.warning("readiness: chain %s is unreachable: %s", name, exc)
            return False, "unreachable"
        except ChainError as exc:
            log.warning("readiness: chain %s answered with an error: %s", name, exc)
            return False, "answered with an error"
        return True, "answers"

    def _read(self, name: str) -> Deposits:
        """A cheap read that needs the chain's node (its head) and the runtime Tessera uses."""
        return self.chains.gateway(name).deposits()


def _seen(read: "asyncio.Future[Deposits]") -> None:
    """Mark the outcome of a read no probe awaited any more (its probe timed out) as seen."""
    if not read.cancelled():
        read.exception()


async def readiness_of(request: Request) -> Readiness:
    readiness: Readiness = request.app.state.readiness
    return readiness


ReadinessDep = Annotated[Readiness, Depends(readiness_of)]
