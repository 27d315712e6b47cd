"""Start one server at a time on a free port, under the same settings for every app.

uvicorn (``SERVER=uvicorn``, the default): Tessera through its own ``tessera serve`` (1 worker,
uvloop, httptools, its request log on as by default, proxy headers off); the limits through
``uvicorn`` with exactly those options. granian (``SERVER=granian``): both through ``granian
--interface asgi --loop uvloop``, access log off (Tessera's request log included: granian does
not apply Tessera's logging configuration).
"""

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
START_TIMEOUT = 60


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def command(server: str, app: str, port: int, workers: int) -> list[str]:
    """``app`` is "tessera" or a limit of bench/limits.py ("l1", "l2", "l2w")."""
    target = "tessera.main:create_app" if app == "tessera" else f"bench.limits:{app}"
    where = ["--host", "127.0.0.1", "--port", str(port), "--workers", str(workers)]
    if server == "granian":
        factory = ["--factory"] if app == "tessera" else []
        return [
            str(BIN / "granian"),
            "--interface",
            "asgi",
            "--loop",
            "uvloop",
            *where,
            "--log-level",
            "warning",
            "--no-access-log",
            *factory,
            target,
        ]
    if app == "tessera":
        return [str(BIN / "tessera"), "serve", *where]
    return [
        sys.executable,
        "-m",
        "uvicorn",
        target,
        *where,
        "--loop",
        "uvloop",
        "--http",
        "httptools",
        "--log-level",
        "warning",
        "--no-access-log",
        "--no-proxy-headers",
    ]


def server_env(database_url: str) -> dict[str, str]:
    """Tessera's settings and the limits' database; the harness importable after whatever
    PYTHONPATH already names (a baseline checkout's sources come first)."""
    path = os.pathsep.join(filter(None, [os.environ.get("PYTHONPATH"), str(ROOT)]))
    return {
        **os.environ,
        "PYTHONPATH": path,
        "TESSERA_DATABASE_URL": database_url,
        "TESSERA_LOG_LEVEL": "warning",
        "BENCH_DATABASE_URL": database_url,
    }


class Server:
    """One server process group; ``stop`` ends it (and only it)."""

    def __init__(self, server: str, app: str, env: dict[str, str], log: Path, workers: int = 1):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.command = command(server, app, self.port, workers)
        self.log = log.open("ab")
        self.process = subprocess.Popen(
            self.command,
            env=env,
            cwd=ROOT,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self._wait_until_answering()

    def _wait_until_answering(self) -> None:
        """Any HTTP answer will do (the user limits answer 400 to a GET)."""
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            try:
                urllib.request.urlopen(self.url + "/v1/version", timeout=2).close()
                return
            except urllib.error.HTTPError:
                return
            except OSError:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(
                        f"server did not start: {' '.join(self.command)} (see {self.log.name})"
                    ) from None
                time.sleep(0.2)

    def rss_mb(self) -> float:
        return round(tree_rss_kb(self.process.pid) / 1024, 1)

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        self.log.close()
        drop_answered_requests(Path(self.log.name))

    def __enter__(self) -> "Server":
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop()


def drop_answered_requests(log: Path) -> None:
    """Tessera's request log writes a line per request: millions in a run. The server's log is
    kept without the lines of requests answered below 400 (their count is said at the end)."""
    if not log.exists():
        return
    kept = log.with_suffix(".kept")
    dropped = 0
    with log.open("rb") as lines, kept.open("wb") as out:
        for line in lines:
            if b'"tessera.access"' in line:
                try:
                    if json.loads(line).get("status", 500) < 400:
                        dropped += 1
                        continue
                except ValueError:
                    pass
            out.write(line)
        if dropped:
            out.write(
                f"(bench: {dropped} request log lines of answers below 400 dropped)\n".encode()
            )
    kept.replace(log)


def tree_rss_kb(root: int) -> int:
    """Resident memory of a process and all its descendants, from /proc."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parent = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(parent, []).append(int(stat.parent.name))
    total, pending = 0, [root]
    while pending:
        pid = pending.pop()
        pending += children.get(pid, [])
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            continue
        total += next(
            (int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS:")), 0
        )
    return total


class RssSampler:
    """The server tree's RSS every second while a run goes on (``with RssSampler(server)``)."""

    def __init__(self, server: Server) -> None:
        self.server = server
        self.samples: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while True:
            self.samples.append(self.server.rss_mb())
            if self._stop.wait(1.0):
                return

    def __enter__(self) -> "RssSampler":
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.samples.append(self.server.rss_mb())

    def summary(self) -> dict[str, float]:
        return {
            "rss_start_mb": self.samples[0],
            "rss_end_mb": self.samples[-1],
            "rss_max_mb": max(self.samples),
        }
