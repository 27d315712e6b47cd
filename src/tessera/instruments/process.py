"""Where a process's figures live, and the database pool's (or SQLite writer's) gauges.

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

from prometheus_client import CollectorRegistry, Gauge, Histogram
from prometheus_client.multiprocess import MultiProcessCollector, mark_process_dead

from tessera.db import Database
from tessera.db.conflicts import CONFLICTS
from tessera.instruments.http import LATENCY, REQUESTS
from tessera.toolkit import logs

# prometheus-client reads this variable when it is imported, in each process; `tessera serve`
# sets it for its worker processes, which inherit the environment.
MULTIPROC_DIR = "PROMETHEUS_MULTIPROC_DIR"
POOL_SAMPLE_SECONDS = 1.0


class PoolGauges:
    """The database pool's figures (PostgreSQL), summed over the live processes, each with its
    own pool. Made by the first sample or wait, so that SQLite shows none (a gauge, once made,
    is shown at 0): there is no pool to run out of there, each process reading on one
    connection and writing on another, one writer at a time (see tessera.db)."""

    def __init__(self) -> None:
        def gauge(name: str, what: str) -> Gauge:
            return Gauge(
                f"tessera_db_pool_{name}",
                f"{what} (PostgreSQL), over all processes, sampled every second.",
                multiprocess_mode="livesum",
                registry=None,
            )

        self.checked_out = gauge("checked_out", "Database connections in use")
        self.idle = gauge("idle", "Database connections open and idle in the pools")
        self.size = gauge("size", "Connections the pools keep (TESSERA_DB_POOL_SIZE a process)")
        self.overflow = gauge(
            "overflow", "Connections open beyond the pools' size (TESSERA_DB_MAX_OVERFLOW)"
        )
        self.max_overflow = gauge(
            "max_overflow", "Connections the pools may open beyond their size"
        )
        self.wait = Histogram(
            "tessera_db_pool_wait_seconds",
            "How long a request waited for a database connection (PostgreSQL), over all "
            "processes: the pool's queue, and opening a connection when none is idle.",
            buckets=WAIT_BUCKETS,
            registry=None,
        )

    def metrics(self) -> tuple[Gauge | Histogram, ...]:
        return (
            self.checked_out,
            self.idle,
            self.size,
            self.overflow,
            self.max_overflow,
            self.wait,
        )


class WriterGauges:
    """SQLite's writer queue, as ``PoolGauges`` show PostgreSQL's pool: a process writes one
    transaction at a time, the others wait their turn (see tessera.db). Made by the first
    sample or wait, so that PostgreSQL shows none."""

    def __init__(self) -> None:
        self.waiting = Gauge(
            "tessera_db_writes_waiting",
            "Write transactions waiting for their turn to write (SQLite), over all processes, "
            "sampled every second.",
            multiprocess_mode="livesum",
            registry=None,
        )
        self.wait = Histogram(
            "tessera_db_write_wait_seconds",
            "How long a write transaction waited for its turn to write (SQLite), over all "
            "processes.",
            buckets=WAIT_BUCKETS,
            registry=None,
        )

    def metrics(self) -> tuple[Gauge | Histogram, ...]:
        return (self.waiting, self.wait)


WAIT_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
_pool_gauges: PoolGauges | None = None
_writer_gauges: WriterGauges | None = None


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
        pool = _pool_gauges.metrics() if _pool_gauges is not None else ()
        writer = _writer_gauges.metrics() if _writer_gauges is not None else ()
        for metric in (REQUESTS, LATENCY, logs.DROPPED, CONFLICTS, *pool, *writer):
            registry.register(metric)
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


def _gauges() -> PoolGauges:
    global _pool_gauges
    if _pool_gauges is None:
        _pool_gauges = PoolGauges()
    return _pool_gauges


def _writer() -> WriterGauges:
    global _writer_gauges
    if _writer_gauges is None:
        _writer_gauges = WriterGauges()
    return _writer_gauges


def sample_pool(database: Database) -> None:
    """The pool of the hot reads and writes (``db.ConnectionPool``), or SQLite's writer queue."""
    pool = database.pool
    if pool is None:
        _writer().waiting.set(database.writes_waiting)
        return
    gauges = _gauges()
    open_, idle = pool.opened, pool.idle
    gauges.checked_out.set(open_ - idle)
    gauges.idle.set(idle)
    gauges.size.set(database.pool_size)
    gauges.overflow.set(max(open_ - database.pool_size, 0))
    gauges.max_overflow.set(database.max_overflow)


def observe_pool_wait(seconds: float) -> None:
    """A request waited ``seconds`` for a pooled connection (``Database(on_pool_wait=...)``)."""
    _gauges().wait.observe(seconds)


def observe_write_wait(seconds: float) -> None:
    """A write waited ``seconds`` for its turn (SQLite; ``Database(on_write_wait=...)``)."""
    _writer().wait.observe(seconds)


async def sample_pool_until(database: Database, stop: asyncio.Event) -> None:
    """This process's pool (or writer queue) gauges, every second until ``stop``: a sample
    costs the requests nothing, where pool events would cost each of them two updates."""
    while not stop.is_set():
        sample_pool(database)
        with suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), POOL_SAMPLE_SECONDS)
