"""How Tessera's log records are written: one JSON object per line when stderr is not a
terminal (for a log collector), one line of text when a person watches.

Records carry ids and error texts only: secrets are SecretStr or sealed, never logged. A record
may carry structured ``fields`` (``extra={"fields": {...}}``, as the access log does): keys of
the JSON object, ``key=value`` pairs after the text.

The same configuration (``configuration``) is applied by every command and, through uvicorn, by each
worker process of ``tessera serve``, so uvicorn's own records come out the same way.
"""

import json
import logging
import sys
from datetime import UTC, datetime
from typing import Any

from tessera.config import Settings


class JsonFormatter(logging.Formatter):
    """``{"time", "level", "logger", "message", ...fields, "exception"?}`` on one line."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
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
        return json.dumps(line, default=str)


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


def configuration(settings: Settings, *, tty: bool | None = None) -> dict[str, Any]:
    """A ``logging.config.dictConfig`` configuration: every record at ``TESSERA_LOG_LEVEL`` or
    above to stderr through one handler, as JSON unless ``tty`` (default: whether stderr is a
    terminal); the access log at INFO whatever the level."""
    if tty is None:
        tty = sys.stderr.isatty()
    formatter = TextFormatter if tty else JsonFormatter
    level, access_log = settings.log_level, settings.access_log
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"tessera": {"()": f"{__name__}.{formatter.__name__}"}},
        "handlers": {
            "stderr": {
                "class": "logging.StreamHandler",
                "formatter": "tessera",
                "stream": "ext://sys.stderr",
            }
        },
        "root": {"level": level.upper(), "handlers": ["stderr"]},
        "loggers": {"tessera.access": {"level": "INFO"}} if access_log else {},
    }
