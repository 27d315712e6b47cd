"""`tessera devchain` stops on SIGTERM and on SIGINT (a terminal's Ctrl-C), whether Chopsticks
sits idle or a wallet is being funded: one line on stderr, no traceback, and nothing listens on
its port within 5 s (a real `tessera devchain` process and its real Chopsticks)."""

import os
import queue
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest

from tests.chain.conftest import require_chopsticks
from tests.conftest import BACKEND
from tests.serving import BIN, free_port, fresh_database, settings_env, tessera

pytestmark = pytest.mark.chain

READY = "Ctrl-C stops."


class DevchainProcess:
    """``tessera devchain --port PORT`` as a process, its stdout read line by line."""

    def __init__(self, env: dict[str, str], port: int) -> None:
        self.port = port
        self.process = subprocess.Popen(
            [str(BIN / "tessera"), "devchain", "--port", str(port)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,  # a group of its own, as a terminal's foreground job
        )
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line.rstrip("\n"))

    def wait_for(self, text: str, within: float = 120.0) -> None:
        deadline = time.monotonic() + within
        while not any(text in line for line in self.seen):
            assert self.process.poll() is None, f"tessera devchain exited: {self.stderr()}"
            assert time.monotonic() < deadline, f"no {text!r} within {within} s: {self.seen}"
            try:
                self.seen.append(self.lines.get(timeout=0.2))
            except queue.Empty:
                pass

    def stop(self, number: signal.Signals) -> tuple[int, list[str]]:
        """Send the signal (SIGINT to the process group, as a terminal's Ctrl-C does; SIGTERM
        to the process, as `kill` does): the exit code and stderr's lines, once the process has
        exited and nothing listens on the port, both within 5 s."""
        sent = time.monotonic()
        if number == signal.SIGINT:
            os.killpg(self.process.pid, number)
        else:
            self.process.send_signal(number)
        code = self.process.wait(timeout=5)
        while listening(self.port):
            assert time.monotonic() - sent < 5, "Chopsticks still listens 5 s after the signal"
            time.sleep(0.05)
        self._reader.join(timeout=5)
        while not self.lines.empty():
            self.seen.append(self.lines.get())
        return code, self.stderr().splitlines()

    def stderr(self) -> str:
        assert self.process.stderr is not None
        return self.process.stderr.read() if self.process.poll() is not None else ""

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


def listening(port: int) -> bool:
    with socket.socket() as probe:
        probe.settimeout(1)
        return probe.connect_ex(("127.0.0.1", port)) == 0


def connected(pid: int, port: int) -> bool:
    """Whether process ``pid`` holds an established TCP connection to ``port`` (Linux's /proc):
    the dev chain's connection to Chopsticks while it funds a wallet."""
    sockets = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:  # closed meanwhile
            continue
        if target.startswith("socket:["):
            sockets.add(target.removeprefix("socket:[").removesuffix("]"))
    for table in ("tcp", "tcp6"):
        for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
            fields = line.split()
            remote, state, inode = fields[2], fields[3], fields[9]
            if state == "01" and int(remote.rpartition(":")[2], 16) == port and inode in sockets:
                return True
    return False


@pytest.fixture
def devchain_env(tmp_path: Path, settings) -> dict[str, str]:
    require_chopsticks(settings)
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    return settings_env(fresh_database(BACKEND, tmp_path, f"devchain_stop_{worker}"))


@pytest.mark.parametrize("number", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_stops_it_and_chopsticks_when_idle(devchain_env, number):
    port = free_port()
    chain = DevchainProcess(devchain_env, port)
    try:
        chain.wait_for(READY)
        assert listening(port)
        time.sleep(1)  # nothing to fund: asleep between rounds
        code, stderr = chain.stop(number)
    finally:
        chain.kill()
    assert (code, stderr) == (0, ["devchain stopped"])


@pytest.mark.parametrize("number", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_stops_it_and_chopsticks_during_funding(devchain_env, number):
    """A project's wallet to fund: the signal comes once the command has connected to the
    chain to fund it (the metadata read, the account read and written still to come)."""
    tessera("project", "create", "--name", "Acme", env=devchain_env)
    port = free_port()
    chain = DevchainProcess(devchain_env, port)
    try:
        chain.wait_for(READY)
        deadline = time.monotonic() + 30
        while not connected(chain.process.pid, port):
            assert time.monotonic() < deadline, "the funding did not begin"
            time.sleep(0.005)
        code, stderr = chain.stop(number)
    finally:
        chain.kill()
    assert (code, stderr) == (0, ["devchain stopped"])
    assert not [line for line in chain.seen if line.startswith("funded ")]  # stopped mid-way
