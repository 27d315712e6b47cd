"""The access log: one record per request with its id, route template and project when on,
nothing when off; and how every record is written: JSON lines, or text on a terminal."""

import io
import json
import logging
import os
import pty
import re
import select
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import AsyncIterator

import httpx
import pytest

from tessera.main import create_app
from tessera.toolkit import logs
from tests.conftest import BACKEND
from tests.serving import BIN, free_port, fresh_database, serve, settings_env, tessera

FIELDS = {"request_id", "method", "route", "status", "duration_ms"}


async def _get(app, path: str, **headers: str) -> httpx.Response:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://tessera.test") as client:
        return await client.get(path, headers=headers)


@pytest.fixture
def access_log(caplog) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.INFO, logger="tessera.access")
    return caplog


def _fields(caplog: pytest.LogCaptureFixture) -> list[dict]:
    records = [r for r in caplog.records if r.name == "tessera.access"]
    assert all(r.getMessage() == "request" for r in records)
    return [r.fields for r in records]


@pytest.fixture
async def logged_app(settings, database) -> AsyncIterator:
    """An app with the access log on, on the suite's database (``database``: migrated, and
    cleaned after each test)."""
    app = create_app(settings.model_copy(update={"access_log": True}))
    async with app.router.lifespan_context(app):
        yield app


async def test_on_it_logs_one_record_per_request(settings, access_log):
    app = create_app(settings.model_copy(update={"access_log": True}))
    response = await _get(app, "/v1/version?probe=1", **{"x-request-id": "req-access-1"})
    assert response.status_code == 400  # an unknown query parameter
    [fields] = _fields(access_log)
    assert fields.pop("duration_ms") >= 0
    assert fields == {
        "request_id": "req-access-1",
        "method": "GET",
        "route": "/v1/version",  # never the query string
        "status": 400,
    }


async def test_the_route_template_and_the_project_of_the_credential(logged_app, tenant, access_log):
    product_id = str(uuid.uuid4())
    response = await _get(logged_app, f"/v1/products/{product_id}", **tenant.r)
    assert response.status_code == 404
    assert (await _get(logged_app, f"/v1/products/{product_id}")).status_code == 401
    assert (await _get(logged_app, "/no/such/path")).status_code == 404
    authenticated, anonymous, unmatched = _fields(access_log)

    assert set(authenticated) == FIELDS | {"project_id"}
    assert authenticated["route"] == "/v1/products/{id}"  # never the id itself
    assert authenticated["project_id"] == tenant.project_id
    assert (anonymous["route"], anonymous["status"]) == ("/v1/products/{id}", 401)
    assert set(anonymous) == FIELDS
    assert (unmatched["route"], unmatched["status"]) == ("unmatched", 404)
    text = json.dumps([authenticated, anonymous, unmatched], default=str)
    assert product_id not in text and tenant.read_key not in text


async def test_off_it_logs_nothing(settings, access_log):
    app = create_app(settings.model_copy(update={"access_log": False}))
    assert (await _get(app, "/v1/version")).status_code == 200
    assert _fields(access_log) == []


def _record(**fields: object) -> logging.LogRecord:
    record = logging.LogRecord("tessera.access", logging.INFO, __file__, 1, "request", None, None)
    if fields:
        record.fields = fields
    return record


class TestFormats:
    def test_json_one_object_a_line_with_the_fields(self):
        line = logs.JsonFormatter().format(_record(request_id="r1", route="/v1/x", status=200))
        entry = json.loads(line)
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\+00:00", entry.pop("time"))
        assert entry == {
            "level": "info",
            "logger": "tessera.access",
            "message": "request",
            "request_id": "r1",
            "route": "/v1/x",
            "status": 200,
        }

    def test_json_keeps_a_traceback_on_the_line(self):
        try:
            raise RuntimeError("boom")
        except RuntimeError:
            record = logging.LogRecord(
                "tessera", logging.ERROR, __file__, 1, "failed %s", ("x",), sys.exc_info()
            )
        line = logs.JsonFormatter().format(record)
        assert "\n" not in line
        entry = json.loads(line)
        assert entry["message"] == "failed x"
        assert entry["exception"].startswith("Traceback")
        assert entry["exception"].endswith("RuntimeError: boom")

    def test_text_one_readable_line(self):
        line = logs.TextFormatter().format(_record(request_id="r1", route="/v1/x", status=200))
        assert re.fullmatch(
            r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} INFO tessera.access request "
            r"request_id=r1 route=/v1/x status=200",
            line,
        )

    @pytest.mark.parametrize("tty", [False, True])
    def test_json_unless_stderr_is_a_terminal(self, settings, monkeypatch, tty):
        class Stderr(io.StringIO):
            def isatty(self) -> bool:
                return tty

        monkeypatch.setattr(sys, "stderr", Stderr())
        configuration = logs.configuration(settings)
        assert configuration["root"]["handlers"] == ["stderr"]
        handler = _handler(configuration)
        handler.handle(_record(request_id="r1"))
        handler.close()  # what is queued is written
        [line] = sys.stderr.getvalue().splitlines()
        assert line.startswith("{") != tty
        assert "request_id" in line

    def test_the_writer_thread_drops_what_it_cannot_keep_up_with(self, monkeypatch):
        """A stderr that stops taking lines: the handler never waits, it drops and counts."""
        release = threading.Event()

        class Stuck(io.StringIO):
            def write(self, text: str) -> int:
                release.wait(30)
                return super().write(text)

        monkeypatch.setattr(sys, "stderr", Stuck())
        monkeypatch.setattr(logs, "QUEUE_RECORDS", 5)
        dropped = _dropped()
        handler = logs.QueuedStderr(text=False)
        handler.handle(_record(request_id="first"))
        handler.writer.wake.set()
        time.sleep(0.2)  # the writer takes the first line, and waits on the stuck stderr
        began = time.monotonic()
        for n in range(50):
            logs.log_request({"request_id": f"r{n}"})
        assert time.monotonic() - began < 5  # not the 30 s the stuck stderr holds a write
        assert _dropped() - dropped == 45  # five wait
        release.set()
        handler.close()
        written = [json.loads(line) for line in sys.stderr.getvalue().splitlines()]
        assert [line["request_id"] for line in written] == ["first", "r0", "r1", "r2", "r3", "r4"]
        assert {line["logger"] for line in written} == {"tessera.access"}

    def test_a_warning_is_written_at_once_the_request_log_within_moments(self, monkeypatch):
        monkeypatch.setattr(sys, "stderr", io.StringIO())
        monkeypatch.setattr(logs, "FLUSH_SECONDS", 30)
        handler = logs.QueuedStderr(text=False)
        try:
            logs.log_request({"request_id": "r1"})
            handler.handle(
                logging.LogRecord("tessera", logging.WARNING, __file__, 1, "careful", None, None)
            )
            deadline = time.monotonic() + 5
            while sys.stderr.getvalue().count("\n") < 2:
                assert time.monotonic() < deadline, sys.stderr.getvalue()
                time.sleep(0.01)
        finally:
            handler.close()
        first, second = (json.loads(line) for line in sys.stderr.getvalue().splitlines())
        assert (first["request_id"], second["message"]) == ("r1", "careful")

    def test_the_access_log_is_at_info_whatever_the_level(self, settings):
        quiet = settings.model_copy(update={"log_level": "warning", "access_log": True})
        configuration = logs.configuration(quiet, tty=False)
        assert configuration["root"]["level"] == "WARNING"
        assert configuration["loggers"] == {"tessera.access": {"level": "INFO"}}


def _dropped() -> float:
    [family] = logs.DROPPED.collect()
    return next(s.value for s in family.samples if s.name.endswith("_total"))


def _handler(configuration: dict) -> logging.Handler:
    """The stderr handler ``configuration`` makes (as dictConfig would)."""
    options = dict(configuration["handlers"]["stderr"])
    factory = options.pop("()")
    assert factory == "tessera.toolkit.logs.QueuedStderr"
    return logs.QueuedStderr(**options)


ECHOED = ("Tessera API at ", "Credentials: ", "Console: ")  # `tessera serve` prints these


def test_by_default_a_request_is_one_json_line(tmp_path):
    """A default `tessera serve`: the request id a client sent is on exactly one line of the
    log, with the route, status, duration and the credential's project."""
    url = fresh_database(BACKEND, tmp_path, "access_default")
    env = settings_env(url, worker_in_process="false")
    project = tessera("project", "create", "--name", "Logged", env=env)
    env.pop("TESSERA_LOG_LEVEL")  # nothing set but the database
    log = tmp_path / "server.log"
    request_id = f"trace-{uuid.uuid4()}"
    with serve(env, log) as base:
        response = httpx.get(
            f"{base}/v1/products",
            headers={"x-api-key": project["api_key"], "x-request-id": request_id},
        )
        assert response.status_code == 200
        assert response.headers["x-request-id"] == request_id
    mentions = [line for line in log.read_text().splitlines() if request_id in line]
    assert len(mentions) == 1, mentions
    entry = json.loads(mentions[0])
    assert entry.pop("duration_ms") > 0
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT.*", entry.pop("time"))
    assert entry == {
        "level": "info",
        "logger": "tessera.access",
        "message": "request",
        "request_id": request_id,
        "method": "GET",
        "route": "/v1/products",
        "status": 200,
        "project_id": project["project_id"],
    }


def test_every_worker_process_writes_json_lines(tmp_path):
    url = fresh_database(BACKEND, tmp_path, "access_json")
    env = settings_env(url, access_log="true", log_level="info", worker_in_process="false")
    log = tmp_path / "server.log"
    with serve(env, log, "--workers", "2") as base:
        processes, sent = set(), 0
        while len(processes) < 2:  # a new connection each time: either process takes it
            assert sent < 2000, "one process answered everything"
            response = httpx.get(f"{base}/v1/products", timeout=10)
            processes.add(response.headers["x-request-id"][:16])  # a process's prefix
            sent += 1
        time.sleep(0.2)  # the last lines reach the file
    lines = [line for line in log.read_text().splitlines() if not line.startswith(ECHOED)]
    entries = [json.loads(line) for line in lines]  # every record, from every process
    loggers = {entry["logger"] for entry in entries}
    assert {"uvicorn.error", "tessera.access"} <= loggers
    access = [e for e in entries if e.get("route") == "/v1/products"]
    assert len(access) == sent
    assert {e["request_id"][:16] for e in access} == processes  # both processes log
    assert all(e["status"] == 401 and "project_id" not in e for e in access)


def test_on_a_terminal_lines_are_text(tmp_path):
    url = fresh_database(BACKEND, tmp_path, "access_tty")
    env = settings_env(url, log_level="info", worker_in_process="false")
    terminal, stderr = pty.openpty()
    process = subprocess.Popen(
        [str(BIN / "tessera"), "serve", "--port", str(free_port())],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=stderr,
    )
    os.close(stderr)
    output = b""
    try:
        deadline = time.monotonic() + 30
        while b"Application startup complete" not in output:
            assert time.monotonic() < deadline, output
            if select.select([terminal], [], [], 0.5)[0]:
                output += os.read(terminal, 65536)
    finally:
        process.terminate()
        process.wait(10)
        os.close(terminal)
    lines = output.decode().splitlines()
    startup = (
        r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} INFO uvicorn.error Application startup complete."
    )
    assert any(re.fullmatch(startup, line.strip()) for line in lines), lines
    assert not any(line.startswith("{") for line in lines)
