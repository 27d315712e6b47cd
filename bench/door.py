"""The door's upload: how long ``POST /v1/checkins/batch`` takes for 500 scans made offline,
on a real ``tessera serve`` (one process, its defaults), on SQLite and PostgreSQL.

``make bench-door`` (``python -m bench.door``; ``BACKENDS="sqlite"``, ``ROUNDS=5``).

Each round issues 500 new single-use tickets of one event through the API, reads their secrets
and uploads one scan of each in one request: 500 check-ins (each a redemption, an attendee's
check-in, a scan and three changes), timed from the request to its answer. The same request
again (every nonce known: the recorded answers) is timed too. The medians and the slowest are
printed, and the figures go to bench/results/door-<time>.json.
"""

import json
import os
import statistics
import subprocess
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

import httpx
from bench import seed, servers
from bench.servers import BIN

from tessera import migrations

SCANS = 500
ROUNDS = int(os.environ.get("ROUNDS", "5"))
BACKENDS = os.environ.get("BACKENDS", "sqlite postgresql").split()
PG_URL = os.environ.get(
    "PG_URL", "postgresql+asyncpg://tessera:tessera@127.0.0.1:5432/tessera_bench"
)
RESULTS = Path(__file__).resolve().parent / "results"


def cli(env: dict[str, str], *args: str) -> dict:
    done = subprocess.run(
        [str(BIN / "tessera"), *args], env=env, check=True, capture_output=True, timeout=120
    )
    answer: dict = json.loads(done.stdout)
    return answer


def tickets(client: httpx.Client, event_id: str, n: int) -> list[str]:
    """``n`` new single-use tickets of the event, issued to ``n`` new users: their secrets."""
    run = uuid.uuid4().hex[:8]
    users = [{"email": f"door-{run}-{i}@example.com", "firstName": f"Guest {i}"} for i in range(n)]
    created = client.post("/v1/users/create", json=users)
    created.raise_for_status()
    ids = [user["id"] for user in created.json()["users"]]
    product = client.post(
        "/v1/products",
        json={"name": f"Door {run}", "type": "admission", "event_id": event_id},
    )
    product.raise_for_status()
    product_id = product.json()["id"]
    client.post(f"/v1/products/{product_id}/items", json={"users": ids}).raise_for_status()
    return [
        client.get(f"/v1/products/{product_id}/items/{number}/ticket").json()["secret"]
        for number in range(1, n + 1)
    ]


def timed(client: httpx.Client, door: dict[str, str], body: dict) -> tuple[float, list[str]]:
    began = time.perf_counter()
    response = client.post("/v1/checkins/batch", json=body, headers=door)
    seconds = time.perf_counter() - began
    response.raise_for_status()
    return seconds, [result["status"] for result in response.json()["results"]]


def run_backend(backend: str, folder: Path) -> dict:
    url = seed.fresh_database(backend, folder, PG_URL)
    migrations.upgrade(url)
    env = servers.server_env(url)
    project = cli(env, "project", "create", "--name", "bench-door")
    door_key = cli(
        env, "apikey", "create", "--project", project["project_id"], "--permission", "checkin"
    )
    with servers.Server("uvicorn", "tessera", env, folder / f"serve-{backend}.log") as server:
        headers = {"x-api-key": project["api_key"]}
        door = {"x-api-key": door_key["api_key"]}
        first, again = [], []
        with httpx.Client(base_url=server.url, headers=headers, timeout=120) as client:
            event = client.post(
                "/v1/events/create",
                json={
                    "name": "Bench night",
                    "start_date": 1_900_000_000,
                    "end_date": 1_900_010_000,
                    "location": "Hall 1",
                    "address": "Quay 1",
                },
            )
            event.raise_for_status()
            event_id = event.json()["id"]
            for _ in range(ROUNDS):
                made = datetime.now(UTC).replace(microsecond=0).isoformat()
                scans = [
                    {
                        "secret": secret,
                        "nonce": uuid.uuid4().hex,
                        "event_id": event_id,
                        "scanned_at": made,
                        "device": "bench",
                    }
                    for secret in tickets(client, event_id, SCANS)
                ]
                body = {"scans": scans}
                seconds, statuses = timed(client, door, body)
                assert statuses == ["ok"] * SCANS, set(statuses)
                first.append(seconds)
                seconds, statuses = timed(client, door, body)
                assert statuses == ["ok"] * SCANS, set(statuses)
                again.append(seconds)
    return {
        "backend": backend,
        "scans": SCANS,
        "rounds": ROUNDS,
        "upload_seconds": first,
        "upload_median": statistics.median(first),
        "upload_max": max(first),
        "again_seconds": again,
        "again_median": statistics.median(again),
    }


def main() -> None:
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-door-") as folder:
        for backend in BACKENDS:
            row = run_backend(backend, Path(folder))
            rows.append(row)
            print(
                f"{backend}: {SCANS} offline scans in one request: median "
                f"{row['upload_median']:.2f} s, slowest {row['upload_max']:.2f} s "
                f"({ROUNDS} rounds); the same request again: median {row['again_median']:.2f} s",
                flush=True,
            )
    RESULTS.mkdir(exist_ok=True)
    stamp = datetime.now(UTC).strftime("%Y-%m-%d-%H%M%S")
    (RESULTS / f"door-{stamp}.json").write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()
