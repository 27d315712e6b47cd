"""How Tessera's log records are written: one JSON object per line when stderr is not a
terminal (for a log collector), one line of text when a person watches.

Records carry ids and error texts only: secrets are SecretStr or sealed, never logged. A record
may carry structured ``fields`` (``extra={"fields": {...}}``): keys of the JSON object,
``key=value`` pairs after the text.

The same configuration (``configuration``) is applied by every command and, through uvicorn, by
each worker process of ``tessera serve``, so uvicorn's own records come out the same way.

Lines are formatted and written by a thread of their own (``LineWriter``), in batches: the event
loop hands a record over and goes on, and the request log's line per request (``log_request``)
costs the loop a tuple appended to a queue. The writer wakes every ``FLUSH_SECONDS`` (at once
for a warning or worse) and writes what has come in one write. It holds at most
``QUEUE_RECORDS`` lines; past that (stderr blocked, a collector that stopped reading) lines are
dropped and counted (``tessera_log_records_dropped_total`` in /metrics) rather than held in
memory or waited for.
"""

import atexit
import json
import logging
import sys
import threading
import time
from collections import deque
from datetime import UTC, datetime
from typing import Any, Protocol, TextIO

import orjson
from prometheus_client import Counter

QUEUE_RECORDS = 10_000
FLUSH_SECONDS = 0.05
CLOSE_SECONDS = 2.0
ACCESS_LOGGER = "tessera.access"

DROPPED = Counter(
    "tessera_log_records_dropped",
    "Log lines dropped because the writer fell behind (its queue was full).",
    registry=None,
)

access_log = logging.getLogger(ACCESS_LOGGER)


_second: tuple[int, str] = (-1, "")


def _iso(created: float) -> str:
    """``created`` as ISO 8601 in UTC to the millisecond (the date part made once a second)."""
    global _second
    whole = int(created)
    if _second[0] != whole:
        _second = (whole, datetime.fromtimestamp(whole, UTC).strftime("%Y-%m-%dT%H:%M:%S"))
    return f"{_second[1]}.{int((created - whole) * 1000):03d}+00:00"


def _json(line: dict[str, Any]) -> str:
    try:
        return orjson.dumps(line, default=str).decode()
    except orjson.JSONEncodeError:  # what orjson does not take (an integer past 64 bits)
        return json.dumps(line, default=str)


class JsonFormatter(logging.Formatter):
    """``{"time", "level", "logger", "message", ...fields, "exception"?}`` on one line."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": _iso(record.created),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        fields = getattr(record, "fields", None)
        if isinstance(fields, dict):
            line |= {key: value for key, value in fields.items() if key not in line}
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        if record.stack_info:
            line["stack"] = self.formatStack(record.stack_info)
        return _json(line)


class TextFormatter(logging.Formatter):
    """``time LEVEL logger message key=value ...`` (a traceback follows on its own lines)."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s %(message)s")

    def formatMessage(self, record: logging.LogRecord) -> str:
        text = super().formatMessage(record)
        fields = getattr(record, "fields", None)
        if isinstance(fields, dict):
            text += "".join(f" {key}={value}" for key, value in fields.items())
        return text


# A request logged: when it ended (time.time()) and its fields.
Request = tuple[float, dict[str, Any]]


class LineWriter:
    """The thread that formats this process's log lines and writes them to ``stream``."""

    def __init__(self, stream: TextIO, formatter: logging.Formatter) -> None:
        self.stream = stream
        self.formatter = formatter
        self.fast_json = isinstance(formatter, JsonFormatter)
        # deque's append and popleft are safe between threads without a lock.
        self.pending: deque[logging.LogRecord | Request] = deque()
        self.wake = threading.Event()
        self.running = True
        self.thread = threading.Thread(target=self._run, name="tessera-log-writer", daemon=True)
        self.thread.start()

    def put(self, line: logging.LogRecord | Request) -> None:
        if len(self.pending) >= QUEUE_RECORDS:
            DROPPED.inc()
            return
        self.pending.append(line)

    def close(self) -> None:
        """Write what is pending (waiting at most ``CLOSE_SECONDS``: a stderr that takes
        nothing must not hold the process at exit) and stop."""
        if self.running:
            self.running = False
            self.wake.set()
            self.thread.join(CLOSE_SECONDS)

    def _run(self) -> None:
        while self.running:
            self.wake.wait(FLUSH_SECONDS)
            self.wake.clear()
            self._write_pending()
        self._write_pending()

    def _write_pending(self) -> None:
        lines = []
        while self.pending:
            lines.append(self._format(self.pending.popleft()))
        if lines:
            lines.append("")
            try:
                self.stream.write("\n".join(lines))
                self.stream.flush()
            except (OSError, ValueError):  # stderr gone (closed, a broken pipe)
                DROPPED.inc(len(lines) - 1)

    def _format(self, line: logging.LogRecord | Request) -> str:
        if isinstance(line, logging.LogRecord):
            return self.formatter.format(line)
        created, fields = line
        if self.fast_json:
            head = {"time": _iso(created), "level": "info", "logger": ACCESS_LOGGER}
            return _json({**head, "message": "request", **fields})
        return self.formatter.format(_request_record(created, fields))


_writer: LineWriter | None = None  # the configured stderr's, in this process


class QueuedStderr(logging.Handler):
    """Records to stderr through this process's ``LineWriter``."""

    def __init__(self, *, text: bool) -> None:
        global _writer
        super().__init__()
        formatter = TextFormatter() if text else JsonFormatter()
        self.writer = _writer = LineWriter(sys.stderr, formatter)
        atexit.register(self.close)  # what is pending is written

    def emit(self, record: logging.LogRecord) -> None:
        # The message is fixed now (its arguments may change later); formatting, tracebacks
        # included, is the writer's.
        record.msg, record.args = record.getMessage(), None
        self.writer.put(record)
        if record.levelno >= logging.WARNING:
            self.writer.wake.set()

    def close(self) -> None:
        global _writer
        self.writer.close()
        if _writer is self.writer:
            _writer = None
        super().close()


def log_request(fields: dict[str, Any]) -> None:
    """The request log's line for one request, on the ``tessera.access`` logger: handed to the
    writer as it is when Tessera's configuration writes the logs (``configuration``), else
    through the logger as a record."""
    writer = _writer
    if writer is not None:
        writer.put((time.time(), fields))
    elif access_log.isEnabledFor(logging.INFO):
        access_log.handle(_request_record(time.time(), fields))


def _request_record(created: float, fields: dict[str, Any]) -> logging.LogRecord:
    record = access_log.makeRecord(
        ACCESS_LOGGER, logging.INFO, __file__, 0, "request", (), None, extra={"fields": fields}
    )
    record.created = created
    return record


class LogSettings(Protocol):
    """What the logging configuration reads of the settings (``tessera.config.Settings``)."""

    @property
    def log_level(self) -> str: ...

    @property
    def access_log(self) -> bool: ...


def configuration(settings: LogSettings, *, tty: bool | None = None) -> dict[str, Any]:
    """A ``logging.config.dictConfig`` configuration: every record at ``TESSERA_LOG_LEVEL`` or
    above to stderr through one handler and its writer thread, as JSON unless ``tty`` (default:
    whether stderr is a terminal); the request log at INFO whatever the level."""
    if tty is None:
        tty = sys.stderr.isatty()
    level, access = settings.log_level, settings.access_log
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "handlers": {"stderr": {"()": f"{__name__}.{QueuedStderr.__name__}", "text": tty}},
        "root": {"level": level.upper(), "handlers": ["stderr"]},
        "loggers": {ACCESS_LOGGER: {"level": "INFO"}} if access else {},
    }
