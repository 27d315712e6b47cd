"""Claims are limited by the client's address: a proxy's X-Forwarded-For is believed only when
the proxy is named in TESSERA_FORWARDED_ALLOW_IPS (a real server, as deployed)."""

import os
from pathlib import Path

import httpx
import pytest

from tests.conftest import BACKEND
from tests.serving import fresh_database, serve, settings_env


def _attempts(url: str, forwarded_for: list[str]) -> list[int]:
    # An unknown token: 404 once let through, 429 when the address is over its limit.
    return [
        httpx.post(
            f"{url}/v1/claims/tcl_unknown",
            json={"email": "a@example.com"},
            headers={"x-forwarded-for": address},
            timeout=10,
        ).status_code
        for address in forwarded_for
    ]


@pytest.mark.parametrize(
    ("trusted", "expected"), [(True, [404, 404, 429]), (False, [404, 429, 429])]
)
def test_the_client_address_behind_a_trusted_proxy(tmp_path: Path, trusted, expected):
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    settings = {"claim_rate_per_address": 1, "worker_in_process": False}
    if trusted:
        settings["forwarded_allow_ips"] = "127.0.0.1"
    env = settings_env(fresh_database(BACKEND, tmp_path, f"forwarded_{worker}"), **settings)
    with serve(env, tmp_path / "server.log") as url:
        assert _attempts(url, ["203.0.113.1", "203.0.113.2", "203.0.113.2"]) == expected
