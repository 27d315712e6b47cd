"""The claim limit per address holds across `tessera serve --workers 2`: both processes count in
the database, so an address makes its limit of claims, not twice it (a real server, on the
suite's backend: two processes may share a SQLite file too)."""

import asyncio
import os
from pathlib import Path

import httpx

from tests.conftest import BACKEND
from tests.serving import fresh_database, serve, settings_env

LIMIT = 5


async def _attempts(url: str, tokens: range) -> list[tuple[int, str]]:
    """Claims at once, each on a connection of its own (the kernel hands each to either
    process), to unknown links: 404 once let through, 429 when the address is over its limit.
    Each answer's status and the process that gave it (its request ids' prefix)."""
    limits = httpx.Limits(max_keepalive_connections=0)
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=10) as http:
        answers = await asyncio.gather(
            *(http.post(f"/v1/claims/tcl_unknown{n}", json={"email": "a@b.co"}) for n in tokens)
        )
    return [(answer.status_code, answer.headers["x-request-id"][:16]) for answer in answers]


def test_an_address_makes_its_limit_of_claims_across_two_processes(tmp_path: Path):
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    database_url = fresh_database(BACKEND, tmp_path, f"claim_workers_{worker}")
    settings = {
        "claim_rate_per_address": LIMIT,
        "claim_rate_per_link": 1000,
        "worker_in_process": False,
    }
    with serve(
        settings_env(database_url, **settings), tmp_path / "server.log", "--workers", "2"
    ) as url:
        answers = asyncio.run(_attempts(url, range(4 * LIMIT)))
        sent = len(answers)
        # Until each process has answered some (a process that counted alone would let the
        # address in again).
        while len({process for _, process in answers}) < 2:
            assert sent < 400, "one process answered everything"
            answers += asyncio.run(_attempts(url, range(sent, sent + 10)))
            sent = len(answers)
    statuses = sorted(status for status, _ in answers)
    assert statuses == [404] * LIMIT + [429] * (len(answers) - LIMIT)
