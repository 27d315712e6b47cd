"""`tessera serve` as a slow or greedy client meets it: a real server process on 127.0.0.1."""

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tessera import migrations

HEADER_TIMEOUT = 1.0
MAX_CONNECTIONS = 6


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, int]]:
    database_url = f"sqlite+aiosqlite:///{tmp_path_factory.mktemp('server') / 'tessera.db'}"
    migrations.upgrade(database_url)
    port = _free_port()
    env = {
        **os.environ,
        "TESSERA_DATABASE_URL": database_url,
        "TESSERA_HEADER_TIMEOUT_SECONDS": str(HEADER_TIMEOUT),
        "TESSERA_MAX_CONNECTIONS": str(MAX_CONNECTIONS),
        "TESSERA_WORKER_IN_PROCESS": "false",
        "TESSERA_LOG_LEVEL": "warning",
    }
    tessera = Path(sys.executable).with_name("tessera")
    process = subprocess.Popen(
        [tessera, "serve", "--host", "127.0.0.1", "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                if _exchange(port, b"GET /v1/version HTTP/1.1\r\nHost: t\r\n\r\n")[0] == 200:
                    break
            except OSError:
                pass
            assert time.monotonic() < deadline, "tessera serve did not start"
            time.sleep(0.1)
        yield "127.0.0.1", port
    finally:
        process.terminate()
        process.wait(10)


def _connect(port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    return sock


def _read_answer(sock: socket.socket) -> tuple[int, dict, bytes]:
    """Status, JSON body and everything read, up to the server closing the connection."""
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
        if b"\r\n\r\n" in data:
            head, _, body = data.partition(b"\r\n\r\n")
            length = next(
                (
                    int(line.split(b":")[1])
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length:")
                ),
                0,
            )
            if len(body) >= length:
                return int(head.split()[1]), json.loads(body[:length] or b"null"), data
    raise AssertionError(f"closed without an answer: {data!r}")


def _exchange(port: int, request: bytes) -> tuple[int, dict]:
    with _connect(port) as sock:
        sock.sendall(request)
        status, body, _ = _read_answer(sock)
        return status, body


def _closed(sock: socket.socket) -> bool:
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


class TestSlowClients:
    def test_a_connection_that_sends_nothing_gets_408_and_is_closed(self, server):
        _, port = server
        with _connect(port) as sock:
            started = time.monotonic()
            status, body, _ = _read_answer(sock)
            waited = time.monotonic() - started
            assert status == 408 and set(body) == {"message"}
            assert _closed(sock)
        assert HEADER_TIMEOUT * 0.8 < waited < HEADER_TIMEOUT + 2

    def test_headers_sent_a_byte_at_a_time_are_cut_off(self, server):
        _, port = server
        request = b"GET /v1/version HTTP/1.1\r\nHost: t\r\nX-Slow: " + b"a" * 100
        with _connect(port) as sock:
            started = time.monotonic()
            for byte in request:
                try:
                    sock.sendall(bytes([byte]))
                except (BrokenPipeError, ConnectionResetError):
                    break
                if time.monotonic() - started > HEADER_TIMEOUT + 2:
                    break
                time.sleep(0.05)
            status, _, _ = _read_answer(sock)
            assert status == 408
            assert time.monotonic() - started < HEADER_TIMEOUT + 2

    def test_a_keep_alive_connection_gets_a_new_deadline_per_request(self, server):
        _, port = server
        with _connect(port) as sock:
            for _ in range(3):
                sock.sendall(b"GET /v1/version HTTP/1.1\r\nHost: t\r\n\r\n")
                status, body, _ = _read_answer(sock)
                assert status == 200 and body == {"version": "2.72.0"}
                time.sleep(HEADER_TIMEOUT * 0.6)  # in all, longer than one deadline

    def test_past_the_connection_cap_a_new_connection_gets_503(self, server):
        _, port = server
        idle = [_connect(port) for _ in range(MAX_CONNECTIONS)]
        try:
            time.sleep(0.2)
            with _connect(port) as extra:
                status, body, _ = _read_answer(extra)
                assert status == 503 and set(body) == {"message"}
        finally:
            for sock in idle:
                sock.close()
        time.sleep(0.2)
        assert _exchange(port, b"GET /v1/version HTTP/1.1\r\nHost: t\r\n\r\n")[0] == 200


class TestRequestsTheParserRefuses:
    def test_a_100_kb_request_line_is_400_with_errors(self, server):
        _, port = server
        line = b"GET /v1/version?" + b"a" * 100_000 + b" HTTP/1.1\r\nHost: t\r\n\r\n"
        status, body = _exchange(port, line)
        assert status == 400 and len(body["errors"]) == 1

    def test_a_malformed_header_is_400_with_errors(self, server):
        _, port = server
        status, body = _exchange(port, b"GET /v1/version HTTP/1.1\r\nBad Header\r\n\r\n")
        assert status == 400 and body["errors"][0].startswith("request: ")
