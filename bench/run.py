"""``make bench`` (``python -m bench.run``): Tessera next to bare-ASGI limits, per backend.

For each backend: seed a fresh database (bench/seed.py), then start one server at a time on a
free port (bench/servers.py) and drive it with wrk (bench/wrk.py, bench/request.lua): the limits
L1, L2, L2w, then Tessera's scenarios (bench/scenarios.py) and the single-request extras. Prints
one table and writes it with everything raw to bench/results/<UTC time>/. See bench/README.md.
"""

import json
import os
import secrets
import shutil
import statistics
import sys
import time
import urllib.error
import urllib.request
from datetime import UTC, datetime
from pathlib import Path

if __package__ in (None, ""):  # `python bench/run.py`
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import report, seed, servers, wrk
from bench.scenarios import (
    CREATE_1500_MS,
    DEEP_FETCH_MS,
    FETCH_1000,
    FETCH_1000_MS,
    ISSUE_550_MS,
    LOGGED,
    PROFILE,
    SOAK,
    TWO_WORKERS,
    Goal,
    Scenario,
    selected,
)

HERE = Path(__file__).resolve().parent
USERS = int(os.environ.get("USERS", "10000"))
DURATION = int(os.environ.get("DURATION", "5"))
ROUNDS = int(os.environ.get("ROUNDS", "3"))
DURATION_ONE = int(os.environ.get("DURATION_ONE", "5"))
CONNECTIONS = int(os.environ.get("CONNECTIONS", "32"))
BACKENDS = os.environ.get("BACKENDS", "sqlite postgresql").split()
ONLY = os.environ.get("SCENARIOS", "")
SERVER = os.environ.get("SERVER", "uvicorn")
SOAK_ON = os.environ.get("SOAK") == "1"
PG_URL = os.environ.get(
    "BENCH_PG_URL", "postgresql+asyncpg://tessera:tessera@127.0.0.1:5432/tessera_bench"
)
WARMUP = 2  # seconds of load before each measured run, not counted
REPEAT = 3  # calls of each single-request extra (the median is shown)
SOAK_CONNECTIONS = 200
SOAK_SECONDS = int(os.environ.get("SOAK_SECONDS", "60"))
SCALE_USERS = 100_000  # from here a run is a scale run: the deep-offset page too


def wanted(name: str) -> bool:
    return ONLY.lower() in name.lower()


class Bench:
    """One backend's run: its seed data, results folder, server settings and the position of
    every scenario's request sequence (so that later runs never repeat a unique value)."""

    def __init__(self, backend: str, data: dict, folder: Path) -> None:
        self.backend = backend
        self.data = data
        self.folder = folder
        self.env = servers.server_env(data["database_url"])
        self.tag = secrets.token_hex(3)
        self.runs = 0
        self.sent: dict[str, int] = {}

    def server(
        self, app: str, workers: int = 1, *, settings: dict[str, str] | None = None
    ) -> servers.Server:
        """``app`` on ``workers`` processes, with Tessera's ``settings`` (TESSERA_...) beside
        the run's."""
        suffix = f"-w{workers}" if workers > 1 else ""
        suffix += "".join(f"-{k.lower()}-{v}" for k, v in (settings or {}).items())
        log = self.folder / f"{self.backend}-{app}{suffix}.log"
        env = self.env | (settings or {})
        return servers.Server(SERVER, app, env, log, workers=workers)

    def wrk(
        self,
        server: servers.Server,
        scenario: Scenario,
        connections: int,
        seconds: int,
        raw: str | None = None,
    ) -> dict:
        self.runs += 1
        offset = self.sent.get(scenario.name, 0)
        result = wrk.run(
            server.url,
            scenario.request(self.data),
            self.data["ids_dir"],
            connections=connections,
            seconds=seconds,
            offset=offset,
            tag=f"{self.tag}{self.runs}",
            raw=self.folder / f"{self.backend}-{raw}.txt" if raw else None,
        )
        # Requests still in flight when wrk stopped were sent too.
        self.sent[scenario.name] = (
            offset + result["requests"] + connections + result["socket_errors"]
        )
        return result

    def measure(
        self,
        server: servers.Server,
        scenario: Scenario,
        limit: tuple[servers.Server, Scenario] | None = None,
        name: str | None = None,
        *,
        one_connection: bool = True,
    ) -> tuple[dict, list[dict]]:
        """ROUNDS runs of CONNECTIONS connections for DURATION s each (after a warm-up),
        alternating with as many runs of ``limit`` (a server and its scenario, warm already)
        when given; then 1 connection for DURATION_ONE s. The row gives the medians, and the
        ratio of the scenario's median to the limit's over the same rounds; the limit's runs
        are returned for its own row."""
        name = name or scenario.name
        stem = slug(name)
        self.wrk(server, scenario, CONNECTIONS, WARMUP)
        runs, limit_runs = [], []
        for round_ in range(ROUNDS):
            turns = [(server, scenario, runs, stem)]
            if limit is not None:
                limit_server, limit_scenario = limit
                limit_stem = f"{slug(limit_scenario.name)}-for-{stem}"
                turns.append((limit_server, limit_scenario, limit_runs, limit_stem))
            if round_ % 2:  # the limit first every other round: neither always runs second
                turns.reverse()
            for turn_server, turn_scenario, kept, turn_stem in turns:
                raw = f"{turn_stem}.c{CONNECTIONS}.r{round_ + 1}"
                kept.append(self.wrk(turn_server, turn_scenario, CONNECTIONS, DURATION, raw))
        result = _medians(runs)
        if one_connection:
            one = self.wrk(server, scenario, 1, DURATION_ONE, f"{stem}.c1")
            result["p50_ms_1conn"] = one["p50_ms"]
            result["non2xx"] += one["non2xx"]
            result["first_non2xx"] = result["first_non2xx"] or one["first_non2xx"]
        extra: dict[str, object] = {"vs": scenario.limit, "goal": scenario.goal}
        if limit_runs:
            extra["limit_ok_per_s"] = _medians(limit_runs)["ok_per_s"]
            per_round = [
                run["ok_per_s"] / paired["ok_per_s"]
                for run, paired in zip(runs, limit_runs, strict=True)
            ]
            result["notes"] = "ratio per round " + ", ".join(f"{r:.2f}" for r in per_round)
        return self.row(name, result, **extra), limit_runs

    def row(self, name: str, result: dict, **extra: object) -> dict:
        notes = []
        if result.get("first_non2xx"):
            notes.append(f"first non-2xx: {result['first_non2xx'][:160]}")
        if result.get("socket_errors"):
            notes.append(f"{result['socket_errors']} socket errors")
        row = {"backend": self.backend, "scenario": name, **result, **extra}
        row["notes"] = "; ".join(filter(None, [*notes, row.get("notes", "")]))
        p50 = row.get("p50_ms", row.get("p50_ms_1conn"))
        print(
            f"   {name:42} {row.get('ok_per_s') or '':>9} 2xx/s  non-2xx {row.get('non2xx')}"
            f"  p50 {p50} ms  {row['notes']}",
            flush=True,
        )
        return row


def slug(name: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in name).strip("_")


# -- the parts of a backend's run -------------------------------------------------------------


def run_backend(backend: str, folder: Path) -> list[dict]:
    print(f"== {backend}: seeding {USERS} users", flush=True)
    url = seed.fresh_database(backend, folder, PG_URL)
    data = seed.seed(url, USERS, folder, backend)
    print(f"   seeded in {data['seed_seconds']} s", flush=True)
    bench = Bench(backend, data, folder)
    tessera_scenarios, limits = selected(ONLY)
    rows = []
    with bench.server("tessera") as server:
        # Each scenario's rounds alternate with its limit's, both servers up (the idle one
        # costs nothing): the machine's drift over a run touches both sides of a ratio alike.
        for limit in limits:
            with bench.server(limit.app) as limit_server:
                rows += measure_group(bench, server, limit_server, limit, tessera_scenarios)
        rows += extras(bench, server)
        rows += access_log_cost(bench, server)
        if backend == "postgresql" and wanted(f"{PROFILE.name}, 2 workers"):
            rows += two_workers(bench, server)
    add_ratios(rows)
    if SOAK_ON:
        rows += soak(bench)
    return rows


def measure_group(
    bench: Bench,
    server: servers.Server,
    limit_server: servers.Server,
    limit: Scenario,
    scenarios: list[Scenario],
) -> list[dict]:
    """The scenarios compared to ``limit``, then the limit's own row: the medians of all its
    runs (with the scenarios' rounds), and its one-connection run."""
    bench.wrk(limit_server, limit, CONNECTIONS, WARMUP)
    rows, limit_runs = [], []
    for scenario in scenarios:
        if scenario.limit == limit.name:
            row, runs = bench.measure(server, scenario, (limit_server, limit))
            rows.append(row)
            limit_runs += runs
    if not limit_runs:  # the limit alone (SCENARIOS=L2)
        limit_runs = [
            bench.wrk(limit_server, limit, CONNECTIONS, DURATION, f"{limit.name}.c{CONNECTIONS}")
        ]
    result = _medians(limit_runs)
    one = bench.wrk(limit_server, limit, 1, DURATION_ONE, f"{limit.name}.c1")
    result["p50_ms_1conn"] = one["p50_ms"]
    result["non2xx"] += one["non2xx"]
    result["first_non2xx"] = result["first_non2xx"] or one["first_non2xx"]
    return [bench.row(limit.name, result), *rows]


def _medians(runs: list[dict]) -> dict:
    """One result of several runs: the median 2xx/s, p50 and p99, every non-2xx."""
    return {
        "runs": [run["ok_per_s"] for run in runs],
        "requests": sum(run["requests"] for run in runs),
        "ok_per_s": round(statistics.median(run["ok_per_s"] for run in runs), 1),
        "p50_ms": statistics.median(run["p50_ms"] for run in runs),
        "p99_ms": statistics.median(run["p99_ms"] for run in runs),
        "non2xx": sum(run["non2xx"] for run in runs),
        "socket_errors": sum(run["socket_errors"] for run in runs),
        "first_non2xx": next((run["first_non2xx"] for run in runs if run["first_non2xx"]), ""),
    }


def add_ratios(rows: list[dict]) -> None:
    """Each row's ratio to its limit, and whether it meets its goal."""
    for row in rows:
        limit = row.get("limit_ok_per_s")
        if limit and row.get("ok_per_s") is not None:
            row["ratio"] = round(row["ok_per_s"] / limit, 3)
        if (goal := row.pop("goal", None)) is not None:
            row["target"], row["met"] = str(goal), goal.met(row)


EXTRAS = [FETCH_1000.name, "users/fetch limit=1000 offset", "create 1500 users", "issue 550 items"]


def extras(bench: Bench, server: servers.Server) -> list[dict]:
    """One connection: the largest page of users, the largest batches of the write API."""
    rows = []
    if wanted(FETCH_1000.name):
        rows.append(one_connection(bench, server, FETCH_1000, FETCH_1000_MS))
    if USERS >= SCALE_USERS and wanted(EXTRAS[1]):
        last_page = f'{{"limit":1000,"offset":{USERS - 1000}}}'
        name = f"users/fetch limit=1000 offset={USERS - 1000} (1 conn)"
        deep = Scenario(name, "POST", FETCH_1000.path, last_page)
        rows.append(one_connection(bench, server, deep, DEEP_FETCH_MS))
    shop_items = f"/v1/products/{bench.data['shop']}/items"
    for name, path, body, most_ms in [
        (
            "create 1500 users with wallets (1 request)",
            "/v1/users/create",
            new_users,
            CREATE_1500_MS,
        ),
        ("issue 550 items (1 request)", shop_items, recipients, ISSUE_550_MS),
    ]:
        if wanted(name):
            rows.append(timed(bench, server, name, path, body, Goal("p50_ms", most_ms)))
    return rows


def one_connection(
    bench: Bench, server: servers.Server, scenario: Scenario, most_ms: float
) -> dict:
    result = bench.wrk(server, scenario, 1, DURATION_ONE, slug(scenario.name))
    result["p50_ms_1conn"] = result.pop("p50_ms")
    return bench.row(scenario.name, result, goal=Goal("p50_ms_1conn", most_ms))


def new_users(bench: Bench, call: int) -> list[dict]:
    return [
        {"email": f"new-{bench.tag}-{call}-{n}@bench.example", "firstName": "New"}
        for n in range(1500)
    ]  # users/create's limit per call (users.service.MAX_BATCH)


def recipients(bench: Bench, call: int) -> dict:
    ids = (Path(bench.data["ids_dir"]) / "users.txt").read_text().split()
    return {"users": [ids[(call * 550 + n) % len(ids)] for n in range(550)]}  # MAX_ISSUE


def timed(
    bench: Bench, server: servers.Server, name: str, path: str, make_body, goal: Goal
) -> dict:
    """REPEAT single requests one after another; the median time is the row's p50."""
    times, failures = [], []
    for call in range(REPEAT):
        request = urllib.request.Request(
            server.url + path,
            method="POST",
            data=json.dumps(make_body(bench, call)).encode(),
            headers={"x-api-key": bench.data["write_key"], "content-type": "application/json"},
        )
        started = time.perf_counter()
        try:
            urllib.request.urlopen(request, timeout=300).read()
        except urllib.error.HTTPError as error:
            failures.append(f"{error.code} {error.read()[:160].decode(errors='replace')}")
        times.append((time.perf_counter() - started) * 1000)
    result = {
        "p50_ms": round(statistics.median(times), 1),
        "non2xx": len(failures),
        "first_non2xx": failures[0] if failures else "",
        "notes": f"{REPEAT} calls: " + ", ".join(f"{t:.0f}" for t in times) + " ms",
    }
    return bench.row(name, result, goal=goal)


def two_workers(bench: Bench, one_worker: servers.Server) -> list[dict]:
    """``users/profile`` on ``tessera serve --workers 2``, its rounds alternating with the
    1-worker server's."""
    name = f"{PROFILE.name}, 2 workers"
    vs = f"{PROFILE.name} (1 worker)"
    bench.wrk(one_worker, PROFILE, CONNECTIONS, WARMUP)
    with bench.server("tessera", workers=2) as server:
        row, _ = bench.measure(server, PROFILE, (one_worker, PROFILE), name, one_connection=False)
    row["vs"], row["goal"] = vs, TWO_WORKERS
    return [row]


def access_log_cost(bench: Bench, logged: servers.Server) -> list[dict]:
    """The request log's cost: ``LOGGED`` on the run's server (the log on, as by default)
    against a server with ``TESSERA_ACCESS_LOG=false``, their rounds alternating; the ratio is
    on / off."""
    names = [(s, f"{s.name}, access log on") for s in LOGGED]
    names = [(s, name) for s, name in names if wanted(name)]
    if not names:
        return []
    rows = []
    with bench.server("tessera", settings={"TESSERA_ACCESS_LOG": "false"}) as quiet:
        for scenario, name in names:
            bench.wrk(quiet, scenario, CONNECTIONS, WARMUP)
            row, _ = bench.measure(logged, scenario, (quiet, scenario), name, one_connection=False)
            row["vs"] = f"{scenario.name} (access log off)"
            row.pop("goal", None)
            rows.append(row)
    dropped = scraped(logged, "tessera_log_records_dropped_total")
    rows[-1]["notes"] += f"; log lines dropped in the whole run: {dropped:g}"
    return rows


def scraped(server: servers.Server, name: str) -> float:
    """A figure of the server's /metrics (loopback may read it)."""
    with urllib.request.urlopen(server.url + "/metrics", timeout=10) as response:
        for line in response.read().decode().splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
    raise LookupError(f"{name} is not in {server.url}/metrics")


def soak(bench: Bench) -> list[dict]:
    """SOAK_CONNECTIONS connections for SOAK_SECONDS on a read and on a write, on a fresh
    server; its memory (RSS of the process tree) sampled every second."""
    rows = []
    with bench.server("tessera") as server:
        for scenario in SOAK:
            name = f"soak {SOAK_CONNECTIONS} conns {SOAK_SECONDS} s: {scenario.name}"
            with servers.RssSampler(server) as rss:
                result = bench.wrk(server, scenario, SOAK_CONNECTIONS, SOAK_SECONDS, slug(name))
            memory = rss.summary()
            result["notes"] = (
                f"RSS {memory['rss_start_mb']} -> {memory['rss_end_mb']} MB "
                f"(max {memory['rss_max_mb']})"
            )
            rows.append(bench.row(name, result | memory))
    return rows


# -- main -------------------------------------------------------------------------------------


def main() -> None:
    folder = HERE / "results" / datetime.now(UTC).strftime("%Y-%m-%d-%H%M%S")
    folder.mkdir(parents=True)
    settings = {
        "USERS": USERS,
        "DURATION": DURATION,
        "ROUNDS": ROUNDS,
        "DURATION_ONE": DURATION_ONE,
        "CONNECTIONS": CONNECTIONS,
        "SERVER": SERVER,
        "BACKENDS": " ".join(BACKENDS),
        "SCENARIOS": ONLY or "all",
        "SOAK": int(SOAK_ON),
    }
    info = report.machine(SERVER, servers.server_env(""))
    print(f"Tessera from {info['tessera_file']} ({info['tessera_commit']}); results in {folder}")
    started = time.monotonic()
    rows = []
    loads = []
    for backend in BACKENDS:
        before = os.getloadavg()[0]
        rows += run_backend(backend, folder)
        loads.append(f"{backend} {before:.1f} -> {os.getloadavg()[0]:.1f}")
    settings["load_average_1min"] = ", ".join(loads)  # others' work on the machine shows here
    settings["took_minutes"] = round((time.monotonic() - started) / 60, 1)
    text = report.markdown(f"Tessera benchmark {folder.name}", info, settings, rows)
    (folder / "results.json").write_text(
        json.dumps({"machine": info, "settings": settings, "rows": rows}, indent=2)
    )
    (folder / "results.md").write_text(text)
    # The scale run (USERS=1000000) is kept beside the default run's table, not over it; a run
    # of some scenarios, or of one backend outside the scale run, replaces neither.
    scale = USERS >= SCALE_USERS
    whole = not ONLY and (scale or {"sqlite", "postgresql"} <= set(BACKENDS))
    if whole:
        latest = "latest-scale.md" if scale else "latest.md"
        shutil.copyfile(folder / "results.md", HERE / "results" / latest)
    print("\n" + text + f"\nRaw wrk output, server logs and seed data: {folder}")


if __name__ == "__main__":
    main()
