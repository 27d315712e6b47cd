"""A database of the previous release upgrades with ``tessera db upgrade`` and keeps every row,
and the previous release keeps serving on the upgraded schema until it is restarted.

The previous release (``releases.PREVIOUS``, run from its own commit as real processes, each of
which checks that it imported the release's sources) makes a project with its CLI and fills it
through its API: users with custodial and held wallets, activation and reputation, an event and
its attendees, products with items (tickets, a voucher, an NFT collectible whose collection and
mints are queued on a real Asset Hub runtime), a transfer, a redemption, orders (completed with an
``Idempotency-Key``, pending, cancelled), claim links (claimed, revoked), a webhook endpoint,
check-ins (a scan, a refused one, a door's upload), a phone wallet pass registered by a device,
a project logo. It reads all of it back through its API. Then the current code's
``tessera db status`` names what is pending (exit 3) or nothing (exit 0), ``tessera db upgrade``
runs, every row of every table of the release's schema is still there as it was, and the current
server answers every read as the release did (the same ids and fields; fields added since are
allowed), takes the release's token and replays its idempotent answer. Last, the release serves
the upgraded database again: the same reads, then a new user, an order, a ticket and its scan.

No worker runs, so that nothing changes between the reads: webhook deliveries therefore are not
made (the dispatcher is the worker's), and the NFTs stay queued (creating the NFT product is
what needs the chain: it reads the project wallet's balance).
"""

import asyncio
import base64
import secrets
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from PIL import Image
from sqlalchemy import Connection, inspect, literal_column, select, table
from sqlalchemy.ext.asyncio import create_async_engine

from tessera import migrations
from tessera.chain import devchain as dc
from tessera.config import Settings
from tests.chain.conftest import require_chopsticks
from tests.passes.ca import StandInCa
from tests.serving import BIN, serve
from tests.serving import settings_env as environment
from tests.upgrade.project import PUBLIC_URL, Answers, build, differences, person, snapshot
from tests.upgrade.releases import PREVIOUS, answer, program, release_env, run, sources_of

DOTS = 1000 * 10**10  # the project wallet's, enough for a collection's deposit

# The tables of the release's schema its API does not fill here, and why.
UNFILLED = {
    "extrinsics": "the worker signs them, for a chain",
    "metric_counts": "the worker counts the chain work",
    "project_wallet_balances": "the worker reads them from a chain",
    "reconciliations": "the worker compares a product with a chain",
    "worker_heartbeats": "no worker runs",
    "webhook_deliveries": "no worker runs (the dispatcher is the worker's)",
    "mails": "no mail server is configured",
    "operators": "the console's, not the API's",
    "console_sessions": "the console's, not the API's",
    "identity_bindings": "an external OIDC issuer's",
    "rate_buckets": "no rate limit is set",
}


@pytest.fixture
def devchain(tmp_path: Path) -> Iterator[dc.Devchain]:
    """The real Asset Hub runtime (Chopsticks): creating an NFT product reads the project
    wallet's balance from its chain. Without Node.js or Chopsticks the test skips, as the
    chain tests do (CI sets TESSERA_REQUIRE_CHAIN=1, and then it fails)."""
    settings = Settings()
    require_chopsticks(settings)
    chain = dc.Devchain(
        dc.spec_path(settings), dc.cache_path(settings), log=tmp_path / "chopsticks.log"
    )
    chain.start()
    yield chain
    chain.stop()


@pytest.mark.direct_postgresql  # the previous release knows no TESSERA_DB_TRANSACTION_POOLER
def test_a_database_of_the_previous_release_upgrades_and_keeps_serving(
    tmp_path: Path, empty_database_url: str, devchain: dc.Devchain
):
    previous = program(sources := sources_of(PREVIOUS, tmp_path / "previous"))
    (tmp_path / "ca").mkdir()
    env = environment(empty_database_url, **_settings(StandInCa.make(tmp_path / "ca"), devchain))
    previous_env = release_env(sources, env)

    run(previous, "db", "upgrade", env=previous_env)
    assert migrations.status(empty_database_url).current == (PREVIOUS.head,)
    project = answer(previous, "project", "create", "--name", "Upgrade", env=previous_env)
    logo = tmp_path / "logo.png"
    Image.new("RGB", (120, 120), (200, 40, 90)).save(logo, "PNG")
    set_logo = ("project", "set-logo", "--project", project["project_id"], str(logo))
    run(previous, *set_logo, env=previous_env)
    with serve(previous_env, tmp_path / "previous.log", program=previous) as base:
        made = build(base, project["api_key"], fund=lambda address: devchain.fund(address, DOTS))
        before = snapshot(base, made)
        token = access_token(base, project)
    rows = table_rows(empty_database_url)
    assert {name for name, written in rows.items() if not written} <= UNFILLED.keys()

    pending = migrations.status(empty_database_url).pending
    status = db_status(env)
    assert status.returncode == (migrations.UPGRADE_PENDING if pending else 0), status.stderr
    assert status.stdout.splitlines() == [
        f"current: {PREVIOUS.head}",
        f"head: {migrations.head()}",
        *(f"pending: {script.revision} {script.message}" for script in pending),
    ]
    run([str(BIN / "tessera")], "db", "upgrade", env=env)
    upgraded = migrations.status(empty_database_url)
    assert (upgraded.current, upgraded.exit_code) == ((migrations.head(),), 0)
    assert rows_lost(rows, table_rows(empty_database_url)) == []

    with serve(env, tmp_path / "current.log") as base:
        assert differences(before, as_previous(snapshot(base, made))) == []
        assert answered_with_token(base, token) == before["GET /v1/users/count"]
        replayed = httpx.post(
            f"{base}/v1/orders",
            headers=made["headers"] | made["order_key"],
            json=made["order_body"],
            timeout=10,
        )
        assert replayed.headers.get("idempotent-replayed") == "true", replayed.text
        assert (replayed.status_code, replayed.json()) == (201, made["order"])

    with serve(previous_env, tmp_path / "previous-again.log", program=previous) as base:
        assert differences(before, snapshot(base, made)) == []
        writes_and_reads_back(base, made)


def as_previous(answers: Answers) -> Answers:
    """The current release's answers with what it renamed on purpose since the previous one
    named as before (docs/upgrades.md, "Answers that changed"); a renamed field that is not
    there fails the test. Everything else must be as the previous release answered it."""
    renamed: Answers = {}
    for request, answered in answers.items():
        if request.startswith("GET /v1/checkins {"):
            # Issue 44: the scans listed under `scans`, each item's id as `product_item_id`.
            scans = [dict(scan) for scan in answered["scans"]]
            for scan in scans:
                scan["item_id"] = scan.pop("product_item_id")
            answered = {key: value for key, value in answered.items() if key != "scans"}
            answered["data"] = scans
        renamed[request] = answered
    return renamed


def _settings(ca: StandInCa, devchain: dc.Devchain) -> dict[str, object]:
    """One set of settings for every process, the release's and the current code's: the same
    keys open the same secrets, and the URLs they write do not depend on the port."""
    return {
        "env": "test",
        "secret_keys": f"k1:{base64.b64encode(secrets.token_bytes(32)).decode()}",
        "hash_key": secrets.token_hex(32),
        "public_url": PUBLIC_URL,
        "worker_in_process": "false",
        "webhooks_allow_private": "true",
        # No worker mints: the items' NFTs stay queued.
        "chain_assethub_rpc_url": devchain.url,
        "chain_timeout_seconds": 30,
        **ca.settings(),
    }


def db_status(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "tessera"), "db", "status"], env=env, capture_output=True, text=True, timeout=60
    )


def access_token(base: str, project: dict[str, str]) -> str:
    """A token of the project's client, issued by the release."""
    credentials = {"client_id": project["client_id"], "client_secret": project["client_secret"]}
    response = httpx.post(f"{base}/v1/auth/token", data=credentials, timeout=10)
    assert response.status_code == 200, response.text
    token: str = response.json()["access_token"]
    return token


def answered_with_token(base: str, token: str) -> Any:
    response = httpx.get(
        f"{base}/v1/users/count", headers={"authorization": f"Bearer {token}"}, timeout=10
    )
    assert response.status_code == 200, response.text
    return response.json()


# Every row, straight from the database.

Rows = dict[str, list[dict[str, Any]]]


def table_rows(url: str) -> Rows:
    """Every row of every table, as the driver gives it (``alembic_version`` aside)."""

    def read(connection: Connection) -> Rows:
        every_column = select(literal_column("*"))
        return {
            name: [
                dict(row._mapping)
                for row in connection.execute(every_column.select_from(table(name)))
            ]
            for name in inspect(connection).get_table_names()
            if name != "alembic_version"
        }

    async def main() -> Rows:
        engine = create_async_engine(url)
        try:
            async with engine.connect() as connection:
                return await connection.run_sync(read)
        finally:
            await engine.dispose()

    return asyncio.run(main())


def rows_lost(before: Rows, after: Rows) -> list[str]:
    """The rows of ``before`` that ``after`` does not hold as they were, in the columns
    ``before`` had (the columns added since are the upgrade's)."""
    lost = []
    for name, rows in before.items():
        if name not in after:
            lost.append(f"{name}: gone")
            continue
        columns = list(rows[0]) if rows else []
        kept = sorted(repr([row.get(c) for c in columns]) for row in after[name])
        was = sorted(repr([row[c] for c in columns]) for row in rows)
        lost += [f"{name}: {row}" for row in was if row not in kept]
        if len(kept) != len(was):
            lost.append(f"{name}: {len(was)} rows became {len(kept)}")
    return lost


# The release on the upgraded schema.


def writes_and_reads_back(base: str, made: dict[str, Any]) -> None:
    """The release's write paths on the upgraded schema: a new user, an order of a ticket, the
    ticket scanned at the door, each read back."""
    ticket_product = made["products"][0]
    with httpx.Client(base_url=base, headers=made["headers"], timeout=10) as api:
        created = api.post("/v1/users/create", json=[person("eve")])
        assert created.status_code == 201, created.text
        [eve] = created.json()["users"]
        profile = api.post("/v1/users/profile", json={"id": eve["id"]})
        assert profile.status_code == 200, profile.text
        assert (profile.json()["id"], profile.json()["email"]) == (eve["id"], "eve@example.com")

        body = {"user": {"id": eve["id"]}, "items": [{"product_id": ticket_product, "quantity": 1}]}
        ordered = api.post("/v1/orders", json=body)
        assert ordered.status_code == 201, ordered.text
        assert api.get(f"/v1/orders/{ordered.json()['id']}").json() == ordered.json()

        held = api.get(f"/v1/products/{ticket_product}/items", params={"owner_id": eve["id"]})
        [item] = held.json()["items"]
        ticket = api.get(f"/v1/products/{ticket_product}/items/{item['id']}/ticket").json()
        scan = {"secret": ticket["secret"], "nonce": "door-1-0100", "event_id": made["event"]}
        scanned = api.post("/v1/checkins", json=scan)
        assert (scanned.status_code, scanned.json()["status"]) == (200, "ok"), scanned.text
        scans = api.get("/v1/checkins", params={"event_id": made["event"], "limit": 100}).json()
        assert [s["nonce"] for s in scans["data"] if s["item_id"] == item["id"]] == ["door-1-0100"]
        attendees = api.get(f"/v1/events/{made['event']}/attendees").json()["attendees"]
        [attended] = [a for a in attendees if a["user"]["id"] == eve["id"]]
        assert isinstance(attended["checked_in_at"], int)
        assert abs(attended["checked_in_at"] - time.time()) < 60
