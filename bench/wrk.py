"""Run wrk with bench/request.lua and read the line it prints at the end."""

import json
import shlex
import subprocess
from pathlib import Path

LUA = Path(__file__).with_name("request.lua")
TIMEOUT = "10s"  # wrk's default of 2 s would drop the slow tail of the 200-connection soak


def run(
    url: str,
    request: tuple[str, str, str, str],
    ids_dir: str,
    *,
    connections: int,
    seconds: int,
    offset: int,
    tag: str,
    raw: Path | None = None,
) -> dict:
    """One wrk run of ``request`` (method, path, body, API key); 2xx/s, non-2xx, p50/p99."""
    method, path, body, key = request
    command = [
        "wrk",
        "-t1",
        f"-c{connections}",
        f"-d{seconds}s",
        "--timeout",
        TIMEOUT,
        "-s",
        str(LUA),
        url,
        "--",
        method,
        path,
        body,
        key,
        ids_dir,
        str(offset),
        tag,
    ]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if raw is not None:
        shown = shlex.join(command).replace(key, "<api key>") if key else shlex.join(command)
        raw.write_text(f"$ {shown}\n{done.stdout}{done.stderr}")
    lines = done.stdout.splitlines()
    result = next((line for line in lines if line.startswith("RESULT ")), None)
    if result is None:
        raise RuntimeError(f"wrk failed ({done.returncode}): {done.stderr or done.stdout}")
    numbers = json.loads(result.removeprefix("RESULT "))
    measured = numbers["duration_us"] / 1e6
    return {
        "requests": numbers["requests"],
        "ok_per_s": round((numbers["requests"] - numbers["non2xx"]) / measured, 1),
        "non2xx": numbers["non2xx"],
        "socket_errors": numbers["socket_errors"],
        "p50_ms": numbers["p50_us"] / 1000,
        "p99_ms": numbers["p99_us"] / 1000,
        "first_non2xx": next(
            (line.removeprefix("FIRST_NON2XX ") for line in lines if line.startswith("FIRST_")),
            "",
        ),
    }
