"""Job workers' heartbeats: while a worker runs, its row in ``worker_heartbeats`` is moved every
``worker_heartbeat_seconds``, so that any process (a server with TESSERA_WORKER_IN_PROCESS=false
among them) can tell whether some worker is alive (``GET /v1/health/ready``).

The beat runs beside the worker's job loop, not between its jobs: a worker draining a backlog,
or waiting on a slow chain call, is alive and must say so.
Each beat also deletes the rows of workers silent for ``KEEP`` (they died without a word);
a worker that stops takes its own row away.
"""

import asyncio
import logging
import os
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import datetime, timedelta

from tessera.db import Database, Rows
from tessera.jobs import repository
from tessera.models.base import utcnow

log = logging.getLogger("tessera.worker")

KEEP = timedelta(hours=1)


class Heartbeat:
    """One worker's heartbeat (``worker_id``, this host and process)."""

    def __init__(self, database: Database, worker_id: str, *, interval: float) -> None:
        self.database = database
        self.worker_id = worker_id
        self.interval = interval
        self.host = socket.gethostname()[:255]
        self.pid = os.getpid()
        self.started_at = utcnow()

    async def beat(self) -> None:
        """This worker is alive now: its row moved (written again if it was deleted meanwhile),
        and the rows of workers silent for ``KEEP`` deleted."""
        now = utcnow()
        async with self.database.transaction() as tx:
            if not await repository.move_heartbeat(tx, self.worker_id, now):
                row = {
                    "worker_id": self.worker_id,
                    "host": self.host,
                    "pid": self.pid,
                    "started_at": self.started_at,
                    "beat_at": now,
                }
                await repository.add_heartbeat(tx, row)
            await repository.forget_silent_heartbeats(tx, now - KEEP)
            await tx.commit()

    async def forget(self) -> None:
        """This worker stops: its row goes, so that no one counts on it any more."""
        async with self.database.transaction() as tx:
            await repository.forget_heartbeat(tx, self.worker_id)
            await tx.commit()

    @asynccontextmanager
    async def beating(self) -> AsyncIterator[None]:
        """Beat at once and then every ``interval`` while the body runs (however it ends)."""
        done = asyncio.Event()
        task = asyncio.create_task(self._beat_until(done))
        try:
            yield
        finally:
            done.set()
            await task

    async def _beat_until(self, done: asyncio.Event) -> None:
        while not done.is_set():
            try:
                await self.beat()
            except Exception:
                log.exception("worker %s: heartbeat failed", self.worker_id)
            try:
                await asyncio.wait_for(done.wait(), self.interval)
            except TimeoutError:
                pass
        try:
            await self.forget()
        except Exception:
            log.exception("worker %s: could not remove its heartbeat", self.worker_id)


async def freshest(rows: Rows, since: datetime) -> tuple[datetime | None, int]:
    """The last beat of any worker, and how many workers have beaten since ``since``."""
    row = await repository.freshest_heartbeat(rows, since)
    return row.beat_at, row.beating
