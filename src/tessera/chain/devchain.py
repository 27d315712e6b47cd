"""A real Asset Hub runtime on loopback: Chopsticks from the npm registry, for dev and tests.

Chopsticks is installed once into a cache folder and started on 127.0.0.1 with a raw chain spec.
It needs no network. Both are settings (``TESSERA_DEVCHAIN_SPEC``, ``TESSERA_DEVCHAIN_CACHE``);
unset, the spec is the one Tessera carries (``specs/``, the Polkadot Asset Hub runtime, gzipped
package data: its source and licence are in ``specs/SOURCE.md``), unpacked once into the cache
folder, which is a checkout's own ``.cache/chopsticks`` (ignored by git) or, installed,
``~/.cache/tessera/chopsticks``.
"""

import contextlib
import gzip
import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from types import FrameType
from typing import Any

from substrateinterface import SubstrateInterface

from tessera.config import Settings

CHOPSTICKS = "@acala-network/chopsticks@1.5.1"
ENTRY = Path("node_modules") / "@acala-network" / "chopsticks" / "chopsticks.cjs"
DEFAULT_SPEC = "asset-hub-polkadot-local.chainspec.json"
DEFAULT_SPEC_SHA256 = "8de9473bb743aa393c91b92a5ce2878d7577d22976397c10d83c87fc698ba858"


class DevchainUnavailable(RuntimeError):
    pass


def _checkout() -> Path | None:
    """The source checkout this module runs from, if it does (not an installed wheel)."""
    root = Path(__file__).resolve().parents[3]
    return (
        root
        if (root / "pyproject.toml").is_file() and (root / "src" / "tessera").is_dir()
        else None
    )


def spec_path(settings: Settings) -> Path:
    """``TESSERA_DEVCHAIN_SPEC``, else the spec Tessera carries, unpacked into the cache."""
    if settings.devchain_spec is not None:
        return settings.devchain_spec.expanduser().resolve()
    return unpacked_spec(cache_path(settings))


def unpacked_spec(folder: Path) -> Path:
    """The carried spec as a file in ``folder`` (Chopsticks reads a path), unpacked when it is
    missing or not the carried one; processes unpacking at once each write a file of their own
    and move it into place."""
    target = folder / DEFAULT_SPEC
    if target.is_file() and _sha256(target) == DEFAULT_SPEC_SHA256:
        return target
    packed = resources.files(__package__).joinpath("specs", f"{DEFAULT_SPEC}.gz")
    with packed.open("rb") as raw, gzip.open(raw) as spec:
        content = spec.read()
    if hashlib.sha256(content).hexdigest() != DEFAULT_SPEC_SHA256:
        raise DevchainUnavailable(f"the carried chain spec is damaged: {packed}")
    folder.mkdir(parents=True, exist_ok=True)
    partial = folder / f"{DEFAULT_SPEC}.{os.getpid()}.partial"
    partial.write_bytes(content)
    partial.replace(target)
    return target


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def cache_path(settings: Settings) -> Path:
    if settings.devchain_cache is not None:
        return settings.devchain_cache.expanduser().resolve()
    checkout = _checkout()
    if checkout is not None:
        return checkout / ".cache" / "chopsticks"
    return Path.home() / ".cache" / "tessera" / "chopsticks"


def installed(cache: Path) -> bool:
    return (cache / ENTRY).exists()


def install(cache: Path) -> None:
    """npm install into the cache folder (about 1.5 minutes the first time, then nothing)."""
    if installed(cache):
        return
    npm = shutil.which("npm")
    if npm is None:
        raise DevchainUnavailable("npm (Node.js) is needed to run Chopsticks")
    cache.mkdir(parents=True, exist_ok=True)
    subprocess.run(  # noqa: S603 - fixed arguments
        [
            npm,
            "install",
            "--no-audit",
            "--no-fund",
            "--loglevel=error",
            "--prefix",
            str(cache),
            CHOPSTICKS,
        ],
        check=True,
    )


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class Devchain:
    """One Chopsticks process; ``url`` is its websocket endpoint."""

    def __init__(
        self, spec: Path, cache: Path, *, port: int | None = None, log: Path | None = None
    ) -> None:
        self.spec = spec
        self.cache = cache
        self.port = port or free_port()
        self.log = log
        self.process: subprocess.Popen[bytes] | None = None
        self._substrate: SubstrateInterface | None = None

    @property
    def url(self) -> str:
        return f"ws://127.0.0.1:{self.port}"

    def start(self, timeout: float = 60.0) -> "Devchain":
        if not installed(self.cache):
            raise DevchainUnavailable(
                f"Chopsticks is not installed in {self.cache} (make devchain)"
            )
        if not self.spec.exists():
            raise DevchainUnavailable(f"chain spec not found: {self.spec}")
        node = shutil.which("node")
        if node is None:
            raise DevchainUnavailable("Node.js is needed to run Chopsticks")
        output = open(self.log, "wb") if self.log else subprocess.DEVNULL
        # A process group of its own: a terminal's Ctrl-C (sent to the whole foreground group)
        # reaches only Tessera, which ends Chopsticks itself (``stop``) once it has left any
        # call to it, instead of finding it gone in the middle of one.
        self.process = subprocess.Popen(  # noqa: S603 - fixed arguments
            [
                node,
                str(self.cache / ENTRY),
                f"--genesis={self.spec}",
                "--host=127.0.0.1",
                f"--port={self.port}",
                "--build-block-mode=Instant",
            ],
            stdout=output,
            stderr=subprocess.STDOUT,
            cwd=self.cache,
            start_new_session=True,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise DevchainUnavailable(f"Chopsticks exited with {self.process.returncode}")
            try:
                self.rpc("system_chain", [])
                return self
            except OSError:
                time.sleep(0.2)
        self.stop()
        raise DevchainUnavailable(f"Chopsticks did not answer on port {self.port}")

    def rpc(self, method: str, params: list[object]) -> object:
        """A JSON-RPC call over HTTP (Chopsticks serves both HTTP and websocket on its port)."""
        body = json.dumps({"id": 1, "jsonrpc": "2.0", "method": method, "params": params})
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.port}",
            data=body.encode(),
            headers={"content-type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310 - loopback
            answer = json.loads(response.read())
        if "error" in answer:
            raise RuntimeError(f"{method}: {answer['error']}")
        return answer["result"]

    def head(self) -> int:
        """The number of the best block."""
        header = self.rpc("chain_getHeader", [])
        assert isinstance(header, dict)
        return int(header["number"], 16)

    def properties(self) -> dict[str, object]:
        """The chain's token symbol and decimals (``system_properties``)."""
        answer = self.rpc("system_properties", [])
        assert isinstance(answer, dict)
        return answer

    def fund(self, address: str, planck: int) -> None:
        """Set an account's free balance (the dev chain has no sudo; Chopsticks writes storage).
        The rest of the account is kept: Chopsticks writes the whole account it is given, so a
        balance set alone would reset its nonce and the deposits it holds."""
        account = self._account(address)
        account["providers"] = max(1, int(account.get("providers", 0)))
        # Balances as decimal text: JSON numbers past 2^53 do not survive JavaScript.
        data = {name: str(value) for name, value in account.get("data", {}).items()}
        account["data"] = data | {"free": str(planck)}
        self.rpc("dev_setStorage", [{"System": {"Account": [[[address], account]]}}])

    def free(self, address: str) -> int:
        """The account's free balance."""
        return int(self._account(address).get("data", {}).get("free", 0))

    def keep_funded(self, address: str, planck: int) -> bool:
        """Top the account up to ``planck`` when its free balance has fallen below half of it;
        whether it did."""
        if self.free(address) >= planck // 2:
            return False
        self.fund(address, planck)
        return True

    def _account(self, address: str) -> dict[str, Any]:
        if self._substrate is None:
            self._substrate = SubstrateInterface(url=self.url)
        value = self._substrate.query("System", "Account", [address]).value
        return dict(value) if isinstance(value, dict) else {}

    def stop(self, patience: float = 3.0) -> None:
        """End Chopsticks and whatever it started (its process group): SIGTERM, then SIGKILL
        after ``patience`` seconds, so that its port is free within that time."""
        # Chopsticks is told first: closing the connection first would wait for a busy node's
        # answer to the close, and a signal may have left it in the middle of a call.
        running = self.process is not None and self.process.poll() is None
        if running and self.process is not None:
            _signal_group(self.process.pid, signal.SIGTERM)
        if self._substrate is not None:
            with contextlib.suppress(Exception):
                self._substrate.close()
            self._substrate = None
        if running and self.process is not None:
            try:
                self.process.wait(timeout=patience)
            except subprocess.TimeoutExpired:
                _signal_group(self.process.pid, signal.SIGKILL)
                self.process.wait()
        self.process = None

    def __enter__(self) -> "Devchain":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def node_available() -> bool:
    return shutil.which("node") is not None


def _signal_group(leader: int, number: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(leader, number)


class Stop:
    """How ``tessera devchain`` ends: SIGINT, SIGTERM and SIGHUP alike raise
    ``KeyboardInterrupt`` once, wherever the command is (installing, starting Chopsticks,
    funding, asleep), so that one ``finally`` stops Chopsticks; a second signal is ignored and
    cannot interrupt that. Inside ``deferred()`` (an event loop of the command's, which would
    report a task interrupted in the middle as a traceback of its own) the stop waits until the
    block ends."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

    def __init__(self) -> None:
        self.requested = False
        self._deferring = 0

    @contextlib.contextmanager
    def handling(self) -> Iterator["Stop"]:
        previous = {number: signal.signal(number, self._handle) for number in self.SIGNALS}
        try:
            yield self
        finally:
            for number, handler in previous.items():
                signal.signal(number, handler)

    @contextlib.contextmanager
    def deferred(self) -> Iterator[None]:
        self._deferring += 1
        try:
            yield
        finally:
            self._deferring -= 1
        if self.requested and not self._deferring:
            raise KeyboardInterrupt

    def _handle(self, number: int, frame: FrameType | None) -> None:
        if self.requested:
            return
        self.requested = True
        if not self._deferring:
            raise KeyboardInterrupt
