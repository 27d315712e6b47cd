"""`tessera serve` as a slow or greedy client meets it: a real server process on 127.0.0.1."""

import json
import select
import socket
import time
from collections.abc import Iterator

import pytest

from tests.serving import fresh_database, serve, settings_env

UNKNOWN_LINK = "claim link not found"
HEADER_TIMEOUT = 1.0
BODY_TIMEOUT = 2.0
MAX_CONNECTIONS = 6


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    directory = tmp_path_factory.mktemp("server")
    env = settings_env(
        fresh_database("sqlite", directory, "server"),
        header_timeout_seconds=HEADER_TIMEOUT,
        body_timeout_seconds=BODY_TIMEOUT,
        max_connections=MAX_CONNECTIONS,
        worker_in_process=False,
    )
    with serve(env, directory / "server.log") as url:
        yield int(url.rsplit(":", 1)[1])


def _connect(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=5)


def _read_answer(sock: socket.socket) -> tuple[int, dict]:
    """Status and JSON body of the next answer on ``sock``."""
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
                return int(head.split()[1]), json.loads(body[:length] or b"null")
    raise AssertionError(f"closed without an answer: {data!r}")


def _exchange(port: int, request: bytes) -> tuple[int, dict]:
    with _connect(port) as sock:
        sock.sendall(request)
        status, body = _read_answer(sock)
        return status, body


def _closed(sock: socket.socket) -> bool:
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


class TestSlowClients:
    def test_a_connection_that_sends_nothing_gets_408_and_is_closed(self, server):
        port = server
        with _connect(port) as sock:
            started = time.monotonic()
            status, body = _read_answer(sock)
            waited = time.monotonic() - started
            assert status == 408 and set(body) == {"message"}
            assert _closed(sock)
        assert HEADER_TIMEOUT * 0.8 < waited < HEADER_TIMEOUT + 2

    def test_headers_sent_a_byte_at_a_time_are_cut_off(self, server):
        port = server
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
            status, _ = _read_answer(sock)
            assert status == 408
            assert time.monotonic() - started < HEADER_TIMEOUT + 2

    def test_a_keep_alive_connection_gets_a_new_deadline_per_request(self, server):
        port = server
        with _connect(port) as sock:
            for _ in range(3):
                sock.sendall(b"GET /v1/version HTTP/1.1\r\nHost: t\r\n\r\n")
                status, body = _read_answer(sock)
                assert status == 200 and body == {"version": "2.72.0"}
                time.sleep(HEADER_TIMEOUT * 0.6)  # in all, longer than one deadline

    def test_past_the_connection_cap_a_new_connection_gets_503(self, server):
        port = server
        idle = [_connect(port) for _ in range(MAX_CONNECTIONS)]
        try:
            time.sleep(0.2)
            with _connect(port) as extra:
                status, body = _read_answer(extra)
                assert status == 503 and set(body) == {"message"}
        finally:
            for sock in idle:
                sock.close()
        time.sleep(0.2)
        assert _exchange(port, b"GET /v1/version HTTP/1.1\r\nHost: t\r\n\r\n")[0] == 200


class TestSlowBodies:
    # An open route that reads its body (a project route refuses a request without a
    # credential before it reads the body).
    HEAD = (
        b"POST /v1/claims/tcl_unknown HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
        b"Idempotency-Key: slow\r\nContent-Length: %d\r\n\r\n"
    )

    def test_a_body_that_trickles_in_gets_408_and_the_connection_is_closed(self, server):
        body = b'{"email": "slow@example.com"}' + b" " * 64
        with _connect(server) as sock:
            sock.sendall(self.HEAD % len(body))
            began = time.monotonic()
            for byte in body:  # a byte every quarter second, until the server answers
                if select.select([sock], [], [], 0.25)[0]:
                    break
                sock.sendall(bytes([byte]))
            status, answer = _read_answer(sock)
            assert BODY_TIMEOUT - 0.5 <= time.monotonic() - began <= BODY_TIMEOUT + 2
            assert (status, answer) == (408, {"errors": ["body: not received within 2 s"]})
            assert _closed(sock)

    def test_a_body_that_stops_gets_408(self, server):
        with _connect(server) as sock:
            sock.sendall(self.HEAD % 100 + b"[")
            status, answer = _read_answer(sock)
            assert (status, answer) == (408, {"errors": ["body: not received within 2 s"]})
            assert _closed(sock)

    def test_a_slow_but_timely_body_is_read(self, server):
        with _connect(server) as sock:
            body = b'{"email": "slow@example.com"}'
            sock.sendall(self.HEAD % len(body) + body[:5])
            time.sleep(BODY_TIMEOUT / 2)
            sock.sendall(body[5:])
            status, answer = _read_answer(sock)
            assert (status, answer) == (404, {"message": UNKNOWN_LINK})


class TestRequestsTheParserRefuses:
    def test_a_100_kb_request_line_is_400_with_errors(self, server):
        port = server
        line = b"GET /v1/version?" + b"a" * 100_000 + b" HTTP/1.1\r\nHost: t\r\n\r\n"
        status, body = _exchange(port, line)
        assert status == 400 and len(body["errors"]) == 1

    def test_a_malformed_header_is_400_with_errors(self, server):
        port = server
        status, body = _exchange(port, b"GET /v1/version HTTP/1.1\r\nBad Header\r\n\r\n")
        assert status == 400 and body["errors"][0].startswith("request: ")
