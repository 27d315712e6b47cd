"""The machine, and the table of results (markdown)."""

import os
import platform
import subprocess
import sys
from pathlib import Path

COLUMNS = [
    "backend",
    "scenario",
    "2xx/s",
    "non-2xx",
    "p50 ms",
    "p99 ms",
    "p50 ms 1 conn",
    "vs",
    "ratio",
    "target",
    "met",
    "notes",
]


def machine(server: str, env: dict[str, str]) -> dict:
    cpuinfo = Path("/proc/cpuinfo").read_text().splitlines()
    cpu = next(
        (line.split(":", 1)[1].strip() for line in cpuinfo if line.startswith("model name")),
        platform.processor(),
    )
    memory_kb = int(Path("/proc/meminfo").read_text().split()[1])
    tessera = tessera_under_test(env)
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "ram_gib": round(memory_kb / 1024 / 1024, 1),
        "python": platform.python_version(),
        "server": f"{server} {package_version(server)}",
        "tessera_file": tessera,
        "tessera_commit": git_commit(Path(tessera).parent),
        "harness_commit": git_commit(Path(__file__).parent),
    }


def tessera_under_test(env: dict[str, str]) -> str:
    """Where the servers import Tessera from (PYTHONPATH may name another checkout)."""
    return subprocess.run(
        [sys.executable, "-c", "import tessera; print(tessera.__file__)"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()


def package_version(name: str) -> str:
    from importlib.metadata import version

    return version(name)


def git_commit(directory: Path) -> str:
    def git(*args: str) -> str:
        return subprocess.run(
            ["git", "-C", str(directory), *args], capture_output=True, text=True
        ).stdout.strip()

    commit = git("rev-parse", "--short", "HEAD")
    if not commit:
        return "unknown"
    dirty = git("status", "--porcelain", "--", ".")
    return commit + (" + uncommitted changes" if dirty else "")


def table(rows: list[dict]) -> str:
    lines = [
        "| " + " | ".join(COLUMNS) + " |",
        "|" + "|".join("---:" if c in NUMERIC else "---" for c in COLUMNS) + "|",
    ]
    lines += ["| " + " | ".join(cells(row)) + " |" for row in rows]
    return "\n".join(lines)


NUMERIC = {"2xx/s", "non-2xx", "p50 ms", "p99 ms", "p50 ms 1 conn", "ratio", "target"}


def cells(row: dict) -> list[str]:
    def number(key: str, digits: int = 2) -> str:
        value = row.get(key)
        return "" if value is None else f"{value:,.{digits}f}"

    met = row.get("met")
    return [
        row["backend"],
        row["scenario"],
        number("ok_per_s", 0),
        "" if row.get("non2xx") is None else str(row["non2xx"]),
        number("p50_ms"),
        number("p99_ms"),
        number("p50_ms_1conn"),
        row.get("vs") or "",
        number("ratio"),
        row.get("target") or "",
        "" if met is None else ("yes" if met else "**no**"),
        row.get("notes", ""),
    ]


def markdown(title: str, info: dict, settings: dict, rows: list[dict]) -> str:
    described = (
        f"{info['cpu']}, {info['cores']} cores, {info['ram_gib']} GiB RAM; "
        f"Python {info['python']}; {info['server']}, 1 worker, uvloop"
        + (
            ", httptools, Tessera's request log on (as by default), the limits' access log off"
            if info["server"].startswith("uvicorn")
            else ", access log off"
        )
    )
    knobs = ", ".join(f"{k}={v}" for k, v in settings.items())
    return (
        f"# {title}\n\n"
        f"- Machine: {described}\n"
        f"- Tessera: {info['tessera_file']} at {info['tessera_commit']}; "
        f"harness at {info['harness_commit']}\n"
        f"- Settings: {knobs}\n"
        f"- Each scenario: `wrk -t1`, a 2 s warm-up, then ROUNDS runs of DURATION s alternating "
        f"with its limit's; 2xx/s (2xx answers only), p50 and p99 are the runs' medians; "
        f"ratio = the scenario's median 2xx/s / its limit's over the same rounds "
        f"(see bench/README.md)\n\n"
        f"{table(rows)}\n"
    )
