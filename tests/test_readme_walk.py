"""The README's five-minute walk, run as written: the ```sh blocks under its heading, in order,
by bash with ``set -euo pipefail``, against a real ``tessera serve`` on a fresh database of the
suite's backend with no chain configured, from a directory laid out as a checkout is
(``.venv/bin/tessera``, the CLI the walk calls). Then what the walk says it did is read back."""

import asyncio
import json
import os
import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from sqlalchemy.engine import make_url

from tests.conftest import BACKEND
from tests.serving import BIN, ROOT, drop_postgres_database, fresh_database, serve, settings_env

WALK = "## A five-minute walk"
# The shell variables the walk captures, read back after it ran.
CAPTURED = ("API_KEY", "ADA", "BOB", "CY", "EVENT", "PASS", "ITEM", "SECRET", "DRINKS", "VOUCHER")


def walk_blocks() -> list[str]:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert f"\n{WALK}\n" in readme, "the README's walk is gone"
    section = readme.split(f"\n{WALK}\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^```sh\n(.*?)^```$", section, re.DOTALL | re.MULTILINE)


def changes_in_the_end(api: httpx.Client) -> list[str]:
    """The feed's types once it shows as many as the walk made (30 s at most)."""
    deadline = time.monotonic() + 30
    while True:
        types = [event["type"] for event in api.get("/changes?limit=100").json()["events"]]
        if len(types) >= 15 or time.monotonic() > deadline:
            return types
        time.sleep(0.2)


@pytest.fixture
def database_url(tmp_path: Path) -> Iterator[str]:
    name = f"readme_walk_{os.environ.get('PYTEST_XDIST_WORKER', 'main')}"
    url = fresh_database(BACKEND, tmp_path, name)
    yield url
    if BACKEND == "postgresql":
        base = os.environ["TESSERA_TEST_DATABASE_URL"]
        asyncio.run(drop_postgres_database(base, make_url(url).database or ""))


def test_the_walk_runs_as_written_and_does_what_it_says(tmp_path: Path, database_url: str):
    blocks = walk_blocks()
    assert len(blocks) == 9
    bash = shutil.which("bash")
    assert bash is not None, "the walk is bash"
    env = settings_env(database_url)
    checkout = tmp_path / "checkout"
    (checkout / ".venv" / "bin").mkdir(parents=True)
    (checkout / ".venv" / "bin" / "tessera").symlink_to(BIN / "tessera")
    captured = tmp_path / "captured"
    script = "\n".join(
        [
            "set -euo pipefail",
            *blocks,
            f'for name in {" ".join(CAPTURED)}; do echo "$name=${{!name}}"; done > {captured}',
        ]
    )
    with serve(env, tmp_path / "server.log") as base:
        done = subprocess.run(
            [bash, "-c", script],
            cwd=checkout,
            env=env | {"BASE": base},
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
        got = dict(line.split("=", 1) for line in captured.read_text().splitlines())
        assert set(got) == set(CAPTURED) and all(got.values()), got
        assert got["API_KEY"].startswith("tsk_")

        # What each step printed (its comment in the README says the same).
        printed = done.stdout.splitlines()
        assert json.loads(printed[0])["custody"] == "custodial"
        assert json.loads(printed[5])["user"]["email"] == "cy@example.com"
        assert printed[1:5] == ["completed", "bob@example.com", "cy@example.com", "ok"]
        assert printed[6] == "1"
        # In commit order. On PostgreSQL a change shows once the transactions that began before
        # it have ended, in any database of the cluster (tessera.changes.service): the suite's
        # other workers may hold the newest back for a moment, so the walk may see a prefix.
        every_change = [
            *["user.created"] * 3,
            "product.created",
            "item.issued",
            "item.issued",
            "order.created",
            "order.completed",
            "item.transferred",
            "item.redeemed",
            "attendee.checked_in",
            "checkin.created",
            "product.created",
            "item.issued",
            "item.redeemed",
        ]
        walked = printed[7].split()
        assert walked == every_change[: len(walked)]
        assert len(walked) == len(every_change) or BACKEND == "postgresql", walked

        with httpx.Client(base_url=f"{base}/v1", headers={"x-api-key": got["API_KEY"]}) as api:
            attendees = api.get(f"/events/{got['EVENT']}/attendees").json()["attendees"]
            assert [a["user"]["id"] for a in attendees] == [got["CY"]]
            assert isinstance(attendees[0]["checked_in_at"], int)

            cy_holds = api.get(f"/products/{got['PASS']}/items", params={"owner_id": got["CY"]})
            [ticket] = cy_holds.json()["items"]
            assert ticket["id"] == got["ITEM"]
            assert (ticket["redemption_count"], ticket["is_fully_redeemed"]) == (1, True)
            assert api.get(f"/products/{got['PASS']}/items").json()["pagination"]["total"] == 2

            assert changes_in_the_end(api) == every_change

            sales = api.get(f"/products/{got['PASS']}/sales").json()["sales"]
            assert [(s["user_id"], s["order_status"]) for s in sales] == [(got["BOB"], "completed")]

            [voucher] = api.get(f"/products/{got['DRINKS']}/items").json()["items"]
            assert (voucher["id"], voucher["user"]["id"]) == (got["VOUCHER"], got["BOB"])
            assert (voucher["redemption_count"], voucher["redemption_quantity"]) == (1, 2)

            # The scan again with the ticket's secret and another nonce: used already.
            again = api.post("/checkins", json={"secret": got["SECRET"], "nonce": "again"})
            assert again.status_code == 409
            assert again.json()["reason"] == "already_checked_in"
            # Ada's user never held the ticket after the transfer.
            assert (
                api.get(f"/products/{got['PASS']}/items", params={"owner_id": got["ADA"]}).json()[
                    "items"
                ]
                == []
            )
