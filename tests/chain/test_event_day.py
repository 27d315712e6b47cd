"""The whole event day, small, on the suite's database: bench/event.py's day (``make
bench-event`` runs it at 10,000 tickets), against real ``tessera serve`` processes (two and a
``tessera worker`` on PostgreSQL, one with its worker in process on SQLite), the real Asset Hub
runtime and a local SMTP sink.

A first burst of 64 concurrent first orders of a new project; 120 tickets sold by 32 clients,
minted, 12 passed on, mailed; four doors that sync, scan offline (24 second scans, the 12
replaced secrets) and upload at once; the reconciliation. Every answer is counted by status and
every log line read: the day must end with no problem, which ``Report.problems`` lists (the
figures are the benchmark's, never asserted here; only what must hold is).
"""

import asyncio
import logging

import pytest
from bench.event import Size, is_error, run_day

from tessera.toolkit.logs import JsonFormatter
from tests.conftest import BACKEND
from tests.serving import fresh_database


@pytest.mark.chain
def test_the_whole_day_together(devchain, tmp_path):
    url = fresh_database(BACKEND, tmp_path, "event_day")
    workers = 2 if BACKEND == "postgresql" else 1
    size = Size.small()
    report = asyncio.run(run_day(url, BACKEND, size, tmp_path, workers, devchain))
    assert report.problems == [], report.table()
    # What the day checked, as it counted it.
    assert report.facts["first burst: orders answered 201"] == "64 of 64"
    assert report.facts["NFTs on chain"] == size.tickets
    assert report.facts["door: check-ins ok"] == size.tickets
    assert report.facts["door: conflicts listed"] == size.second_scans
    assert report.facts["reconciliation: findings"] == 0
    assert report.facts["error lines in the logs"] == 0
    assert not [status for status in report.statuses if status >= 500]


def test_the_day_reads_an_error_line_as_one():
    """The day's "no error line" holds only if an error line would be seen: lines as Tessera's
    own log writes them to a file (JSON), a traceback, and what ``tessera serve`` prints first."""
    formatter = JsonFormatter()

    def line(level: int) -> str:
        return formatter.format(logging.LogRecord("tessera.jobs", level, "x", 1, "a", None, None))

    assert is_error(line(logging.ERROR)) and is_error(line(logging.CRITICAL))
    assert not is_error(line(logging.WARNING)) and not is_error(line(logging.INFO))
    assert is_error("Traceback (most recent call last):")
    assert not is_error("Tessera API at http://127.0.0.1:8000/v1 (docs: ...)")
