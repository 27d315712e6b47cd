"""``make bench``: Tessera next to bare-ASGI limits, on SQLite and PostgreSQL, in one run.

See bench/README.md. Every number is measured here; nothing is asserted.
"""

import json
import os
import platform
import secrets
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

from bench.prepare import seed

HERE = Path(__file__).parent
PG_URL = os.environ.get("BENCH_PG_URL", "postgresql+asyncpg://tessera:tessera@127.0.0.1:5432/tessera_bench")
DURATION = int(os.environ.get("DURATION", "15"))
DURATION_ONE = int(os.environ.get("DURATION_ONE", "5"))
CONNECTIONS = int(os.environ.get("CONNECTIONS", "32"))
USERS = int(os.environ.get("USERS", "10000"))
SERVER = os.environ.get("SERVER", "uvicorn")
BACKENDS = os.environ.get("BACKENDS", "sqlite postgresql").split()
ONLY = os.environ.get("SCENARIOS", "")
SOAK = os.environ.get("SOAK") == "1"


@dataclass(frozen=True)
class Scenario:
    name: str
    limit: str  # "L1", "L2", "L2w", or "" for a limit itself
    goal: float
    method: str
    path: str  # may hold {id}, filled per request from `ids`
    body: str = ""  # may hold {id} and {n} (a per-run unique counter)
    ids: str = ""  # key of data.json
    app: str = "tessera"  # or bare.l1 / l2 / l2w


def scenarios(data: dict) -> list[Scenario]:
    event, plain, drinks = data["event"], data["product"], data["redeemable"]
    user = '{"id":"{id}"}'
    return [
        Scenario("L1", "", 0, "GET", "/v1/version", app="l1"),
        Scenario("L2", "", 0, "POST", "/", user, "users", app="l2"),
        Scenario("L2w", "", 0, "POST", "/", user, "users", app="l2w"),
        Scenario("GET /v1/version", "L1", 0.5, "GET", "/v1/version"),
        Scenario("POST users/profile {id}", "L2", 0.4, "POST", "/v1/users/profile", user, "users"),
        Scenario("GET events/{id}", "L2", 0.4, "GET", f"/v1/events/{event}"),
        Scenario("GET products/{id}", "L2", 0.4, "GET", f"/v1/products/{plain}"),
        Scenario("GET orders/{id}", "L2", 0.4, "GET", "/v1/orders/{id}", ids="orders"),
        Scenario("GET users/count", "L2", 0.4, "GET", "/v1/users/count"),
        Scenario("GET products?limit=20", "L2", 0.25, "GET", "/v1/products?limit=20"),
        Scenario("GET sales page of 20", "L2", 0.25, "GET", f"/v1/products/{plain}/sales?limit=20"),
        Scenario(
            "register attendee", "L2w", 0.2, "POST", "/v1/events/attendees/register",
            f'{{"event_id":"{event}","user_id":"{{id}}"}}', "users",
        ),
        Scenario(
            "issue 1 item", "L2w", 0.2, "POST", f"/v1/products/{plain}/items",
            '{"users":["{id}"]}', "users",
        ),
        Scenario(
            "redeem with nonce", "L2w", 0.2, "POST", f"/v1/products/{drinks}/items/redeem",
            '{"product_item_id":"{id}","nonce":"{n}"}', "items",
        ),
        Scenario(
            "create completed order", "L2w", 0.2, "POST", "/v1/orders",
            f'{{"user":{{"id":"{{id}}"}},"items":[{{"product_id":"{plain}","quantity":1}}]}}',
            "users",
        ),
    ]


# -- wrk -------------------------------------------------------------------------------------

LUA = """
local ids = {%(ids)s}
local headers = {["content-type"] = "application/json", ["x-api-key"] = "%(key)s"}
local n = 0
local prefix = "%(prefix)s-" .. tostring(math.random(1, 1e9))
function setup(thread) table.insert(threads, thread) end
function init(args) non2xx = 0 end
function request()
  n = n + 1
  local id = #ids > 0 and ids[math.random(#ids)] or ""
  local path = string.gsub(%(path)s, "{id}", id)
  local body = string.gsub(string.gsub(%(body)s, "{id}", id), "{n}", prefix .. n)
  if body == "" then body = nil end
  return wrk.format(%(method)s, path, headers, body)
end
function response(status, headers, body)
  if status < 200 or status > 299 then non2xx = non2xx + 1 end
end
function done(summary, latency, requests)
  local bad = 0
  for _, t in ipairs(threads) do bad = bad + t:get("non2xx") end
  io.write(string.format('RESULT {"non2xx": %%d, "p50": %%d, "p99": %%d, "errors": %%d}\\n',
    bad, latency:percentile(50), latency:percentile(99),
    summary.errors.connect + summary.errors.read + summary.errors.write
      + summary.errors.timeout))
end
threads = {}
"""


def lua(scenario: Scenario, data: dict, folder: Path) -> Path:
    ids = ",".join(f'"{i}"' for i in data[scenario.ids]) if scenario.ids else ""
    path = folder / f"{scenario.name.replace('/', '_').replace(' ', '_')}.lua"
    path.write_text(
        LUA
        % {
            "ids": ids,
            "key": data["api_key"],
            "prefix": secrets.token_hex(4),
            # JSON string literals are Lua string literals for this ASCII text.
            "path": json.dumps(scenario.path),
            "body": json.dumps(scenario.body),
            "method": json.dumps(scenario.method),
        }
    )
    return path


def wrk(url: str, script: Path, connections: int, seconds: int, raw: Path) -> dict:
    out = subprocess.run(
        ["wrk", "-t1", f"-c{connections}", f"-d{seconds}s", "-s", str(script), url],
        capture_output=True, text=True, check=True,
    ).stdout
    raw.write_text(out)
    result = json.loads(next(l for l in out.splitlines() if l.startswith("RESULT "))[7:])
    total = int(next(l for l in out.splitlines() if "requests in" in l).split()[0])
    return {
        "ok_per_s": round((total - result["non2xx"]) / seconds, 1),
        "non2xx": result["non2xx"],
        "errors": result["errors"],
        "p50_ms": result["p50"] / 1000,
        "p99_ms": result["p99"] / 1000,
    }


# -- servers ---------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Server:
    """One server process (uvicorn or granian, 1 worker unless told) for one app."""

    def __init__(self, app: str, env: dict[str, str], workers: int = 1) -> None:
        self.port = free_port()
        target = "tessera.main:create_app" if app == "tessera" else f"bench.bare:{app}"
        factory = app == "tessera"
        bin_dir = Path(sys.executable).parent
        if SERVER == "granian":
            command = [str(bin_dir / "granian"), "--interface", "asgi", "--loop", "uvloop",
                       "--host", "127.0.0.1", "--port", str(self.port), "--workers", str(workers),
                       "--log-level", "warning", *(["--factory"] if factory else []), target]
        else:
            command = [sys.executable, "-m", "uvicorn", target, "--host", "127.0.0.1",
                       "--port", str(self.port), "--loop", "uvloop", "--http", "httptools",
                       "--log-level", "warning", "--no-access-log", "--workers", str(workers),
                       *(["--factory"] if factory else [])]
        self.process = subprocess.Popen(
            command, env={**os.environ, **env}, cwd=HERE.parent,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        self.url = f"http://127.0.0.1:{self.port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(self.url + "/v1/version", timeout=1)
                break
            except urllib.error.HTTPError:
                break  # answering
            except OSError:
                if time.monotonic() > deadline or self.process.poll() is not None:
                    raise RuntimeError(f"{app} did not start: {command}") from None
                time.sleep(0.2)

    def rss_mb(self) -> float:
        pids = [str(self.process.pid)]
        children = subprocess.run(["pgrep", "-P", pids[0]], capture_output=True, text=True)
        pids += children.stdout.split()
        total = 0
        for pid in pids:
            try:
                for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1])
            except FileNotFoundError:
                pass
        return round(total / 1024, 1)

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()


# -- the run ---------------------------------------------------------------------------------


def database_url(backend: str, folder: Path) -> str:
    if backend == "sqlite":
        return f"sqlite+aiosqlite:///{folder / 'bench.db'}"
    import asyncio

    import asyncpg

    async def recreate() -> None:
        base = PG_URL.replace("postgresql+asyncpg", "postgresql")
        admin = await asyncpg.connect(base.rsplit("/", 1)[0] + "/postgres")
        name = PG_URL.rsplit("/", 1)[1]
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.execute(f'CREATE DATABASE "{name}"')
        await admin.close()

    asyncio.run(recreate())
    return PG_URL


def timed_requests(url: str, key: str, make, count: int = 5) -> float:
    """Median milliseconds of ``count`` one-at-a-time requests built by ``make(i)``."""
    import httpx

    times = []
    with httpx.Client(base_url=url, headers={"x-api-key": key}, timeout=120) as client:
        for i in range(count):
            method, path, body = make(i)
            started = time.perf_counter()
            response = client.request(method, path, json=body)
            times.append((time.perf_counter() - started) * 1000)
            assert response.status_code in (200, 201), response.text
    return round(statistics.median(times), 1)


def run_backend(backend: str, folder: Path) -> dict:
    print(f"== {backend}: seeding {USERS} users", flush=True)
    url = database_url(backend, folder)
    started = time.monotonic()
    data = seed(url, USERS, folder / f"{backend}-data.json")
    print(f"   seeded in {time.monotonic() - started:.0f} s", flush=True)
    rows = {}
    env = {"BENCH_DATABASE_URL": url, "TESSERA_DATABASE_URL": url, "TESSERA_LOG_LEVEL": "warning"}
    for scenario in scenarios(data):
        if ONLY and scenario.limit and ONLY not in scenario.name:
            continue
        script = lua(scenario, data, folder)
        server = Server(scenario.app, env)
        try:
            stem = folder / f"{backend}-{script.stem}"
            wrk(server.url, script, CONNECTIONS, 2, Path(os.devnull))  # warm up
            row = wrk(server.url, script, CONNECTIONS, DURATION, stem.with_suffix(".c32.txt"))
            one = wrk(server.url, script, 1, DURATION_ONE, stem.with_suffix(".c1.txt"))
            row["p50_ms_1conn"] = one["p50_ms"]
        finally:
            server.stop()
        rows[scenario.name] = row | {"limit": scenario.limit, "goal": scenario.goal}
        print(f"   {scenario.name:28} {row['ok_per_s']:>9} 2xx/s  non-2xx {row['non2xx']}", flush=True)
    for row in rows.values():
        if row["limit"] in rows:
            row["ratio"] = round(row["ok_per_s"] / rows[row["limit"]]["ok_per_s"], 3)
    rows |= extras(backend, data, env, folder)
    return rows


def extras(backend: str, data: dict, env: dict[str, str], folder: Path) -> dict:
    out: dict[str, dict] = {}
    server = Server("tessera", env)
    try:
        users, key = data["users"], data["api_key"]
        fetch = Scenario("users/fetch limit=1000", "", 0, "POST", "/v1/users/fetch",
                         '{"limit":1000}')
        out[fetch.name] = wrk(server.url, lua(fetch, data, folder), 1, DURATION_ONE,
                              folder / f"{backend}-fetch1000.c1.txt")
        if len(users) > 901_000:
            deep = Scenario("users/fetch limit=1000 offset=900000", "", 0, "POST",
                            "/v1/users/fetch", '{"limit":1000,"offset":900000}')
            out[deep.name] = wrk(server.url, lua(deep, data, folder), 1, DURATION_ONE,
                                 folder / f"{backend}-fetchdeep.c1.txt")
        run = secrets.token_hex(3)
        out["create 1500 users with wallets"] = {"ms": timed_requests(
            server.url, key, lambda i: ("POST", "/v1/users/create", [
                {"email": f"x{run}-{i}-{n}@bench.example"} for n in range(1500)]))}
        plain = data["product"]
        out["issue 550 items"] = {"ms": timed_requests(
            server.url, key, lambda i: ("POST", f"/v1/products/{plain}/items", {
                "users": [users[(i * 550 + k) % len(users)] for k in range(550)]}))}
    finally:
        server.stop()
    if backend == "postgresql":
        profile = scenarios(data)[4]
        script = lua(profile, data, folder)
        for workers in (1, 2):
            server = Server("tessera", env, workers=workers)
            try:
                wrk(server.url, script, CONNECTIONS, 2, Path(os.devnull))
                row = wrk(server.url, script, CONNECTIONS, DURATION,
                          folder / f"{backend}-profile-w{workers}.txt")
            finally:
                server.stop()
            out[f"profile, {workers} workers"] = row
        out["profile, 2 workers"]["ratio"] = round(
            out["profile, 2 workers"]["ok_per_s"] / out["profile, 1 workers"]["ok_per_s"], 2)
    if SOAK:
        for scenario in (scenarios(data)[4], scenarios(data)[11]):
            server = Server("tessera", env)
            try:
                before = server.rss_mb()
                row = wrk(server.url, lua(scenario, data, folder), 200, 60,
                          folder / f"{backend}-soak-{scenario.name[:8]}.txt")
                row |= {"rss_mb_before": before, "rss_mb_after": server.rss_mb()}
            finally:
                server.stop()
            out[f"soak 200 conns 60 s: {scenario.name}"] = row
    return out


def machine() -> str:
    cpu = next((l.split(":", 1)[1].strip() for l in Path("/proc/cpuinfo").read_text().splitlines()
                if l.startswith("model name")), platform.processor())
    memory = int(Path("/proc/meminfo").read_text().split()[1]) // (1024 * 1024)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True, cwd=HERE).stdout.strip()
    return (f"{cpu}, {os.cpu_count()} cores, {memory} GiB; Python {platform.python_version()}; "
            f"{SERVER} 1 worker (uvloop{', httptools' if SERVER == 'uvicorn' else ''}); "
            f"wrk -t1 -c{CONNECTIONS} -d{DURATION}s; {USERS} users; commit {commit}")


def table(results: dict[str, dict]) -> str:
    lines = ["| backend | scenario | 2xx/s | non-2xx | p50 ms | p99 ms | p50 ms (1 conn) "
             "| limit | ratio | goal | met |", "|---|---|---:|---:|---:|---:|---:|---|---:|---:|---|"]
    for backend, rows in results.items():
        for name, row in rows.items():
            if "ms" in row:
                lines.append(f"| {backend} | {name} | | | {row['ms']} | | | | | | |")
                continue
            ratio, goal = row.get("ratio"), row.get("goal") or ""
            met = "" if not goal or ratio is None else ("yes" if ratio >= goal else "no")
            lines.append(
                f"| {backend} | {name} | {row['ok_per_s']:,.0f} | {row['non2xx']} "
                f"| {row['p50_ms']:.2f} | {row['p99_ms']:.2f} | {row.get('p50_ms_1conn', '')} "
                f"| {row.get('limit', '')} | {ratio if ratio is not None else ''} | {goal} | {met} |"
            )
    return "\n".join(lines)


def main() -> None:
    folder = HERE / "results" / datetime.now(UTC).strftime("%Y-%m-%d-%H%M%S")
    folder.mkdir(parents=True)
    results = {backend: run_backend(backend, folder) for backend in BACKENDS}
    report = f"# Tessera benchmark, {folder.name}\n\nMachine: {machine()}\n\n{table(results)}\n"
    (folder / "results.json").write_text(json.dumps(results, indent=2))
    (folder / "results.md").write_text(report)
    (HERE / "results" / "latest.md").write_text(report)
    print("\n" + report)
    print(f"raw output: {folder}")


if __name__ == "__main__":
    main()
