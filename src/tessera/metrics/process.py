"""Where a process's figures live, and the database pool's gauges.

With one process, the metrics are objects in its memory. ``tessera serve --workers N`` (N > 1)
makes a fresh directory for the run and names it in ``PROMETHEUS_MULTIPROC_DIR`` before uvicorn
starts its workers: prometheus-client then keeps every process's figures in memory-mapped files
there, and a scrape, whichever process answers it, adds up the files of all of them. The
directory is removed when the server stops.
"""

import asyncio
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from prometheus_client import CollectorRegistry, Gauge
from prometheus_client.multiprocess import MultiProcessCollector, mark_process_dead

from tessera.db import Database
from tessera.metrics.http import LATENCY, REQUESTS

# prometheus-client reads this variable when it is imported, in each process; `tessera serve`
# sets it for its worker processes, which inherit the environment.
MULTIPROC_DIR = "PROMETHEUS_MULTIPROC_DIR"
POOL_SAMPLE_SECONDS = 1.0


class PoolGauges:
    """The database pool's gauges (PostgreSQL), summed over the live processes, each with its
    own pool. Made by the first sample, so that SQLite shows none (a gauge, once made, is shown
    at 0): there is no pool to run out of there, each process reading on one connection and
    writing on another, one writer at a time (see tessera.db)."""

    def __init__(self) -> None:
        self.checked_out = Gauge(
            "tessera_db_pool_checked_out",
            "Database connections in use (PostgreSQL), over all processes, sampled every second.",
            multiprocess_mode="livesum",
            registry=None,
        )
        self.size = Gauge(
            "tessera_db_pool_size",
            "Database connections the pools keep (PostgreSQL: TESSERA_DB_POOL_SIZE a process).",
            multiprocess_mode="livesum",
            registry=None,
        )


_pool_gauges: PoolGauges | None = None


@contextmanager
def multiprocess_directory(workers: int) -> Iterator[None]:
    """With several worker processes, a fresh directory for their metrics while the server
    runs (it replaces one the environment names: figures of a past run must not count)."""
    if workers <= 1:
        yield
        return
    directory = tempfile.mkdtemp(prefix="tessera-metrics-")
    previous = os.environ.get(MULTIPROC_DIR)
    os.environ[MULTIPROC_DIR] = directory
    try:
        yield
    finally:
        if previous is None:
            del os.environ[MULTIPROC_DIR]
        else:
            os.environ[MULTIPROC_DIR] = previous
        shutil.rmtree(directory, ignore_errors=True)


def scrape_registry() -> CollectorRegistry:
    """A registry with the process metrics: every process's, read from their files, or this
    one's."""
    registry = CollectorRegistry()
    directory = os.environ.get(MULTIPROC_DIR)
    if directory:
        _forget_dead_processes(Path(directory))
        MultiProcessCollector(registry, path=directory)  # type: ignore[no-untyped-call]
    else:
        for metric in (REQUESTS, LATENCY):
            registry.register(metric)
        if _pool_gauges is not None:
            registry.register(_pool_gauges.checked_out)
            registry.register(_pool_gauges.size)
    return registry


def _forget_dead_processes(directory: Path) -> None:
    """Drop the live gauges of worker processes that have died (uvicorn replaces a worker that
    dies); their counters stay, as counted requests did happen."""
    for file in directory.glob("gauge_live*_*.db"):
        pid = int(file.stem.rpartition("_")[2])
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            with suppress(FileNotFoundError):  # another process's scrape got there first
                mark_process_dead(pid, str(directory))  # type: ignore[no-untyped-call]
        except PermissionError:  # alive, under another user
            pass


def sample_pool(database: Database) -> None:
    global _pool_gauges
    if database.is_sqlite:
        return
    if _pool_gauges is None:
        _pool_gauges = PoolGauges()
    pool = database.engine.pool
    _pool_gauges.checked_out.set(pool.checkedout())  # type: ignore[attr-defined]
    _pool_gauges.size.set(pool.size())  # type: ignore[attr-defined]


async def sample_pool_until(database: Database, stop: asyncio.Event) -> None:
    """This process's pool gauges, every second until ``stop``: a sample costs the requests
    nothing, where pool events would cost each of them two updates."""
    if database.is_sqlite:
        return
    while not stop.is_set():
        sample_pool(database)
        with suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), POOL_SAMPLE_SECONDS)
