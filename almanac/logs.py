"""Structured logs: one JSON object a line, with the event name and the fields passed in `extra`.

Code logs `log.info("run.finished", extra={"event": "run.finished", "run_id": 7, ...})`;
this formatter keeps every such field, so operators can grep or ship the lines as they are.
"""

from __future__ import annotations

import json
import logging
from datetime import datetime, timezone
from typing import IO, Any

# Attributes every LogRecord has; anything else came from `extra`.
_STANDARD = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime", "taskName"}
_ENCODER = json.JSONEncoder(default=str)  # what json.dumps(entry, default=str) builds on every call


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        message = record.getMessage()
        fields = record.__dict__
        entry: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, timezone.utc).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "event": fields.get("event") or message,
        }
        for key, value in fields.items():
            if key not in _STANDARD and key != "event":
                entry[key] = value
        if record.name == "uvicorn.access" and isinstance(record.args, tuple) and len(record.args) == 5:
            entry.update(_access_fields(record.args))
            entry["event"], message = "http.request", entry["event"]
        if message != entry["event"]:
            entry["message"] = message
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return _ENCODER.encode(entry)


def _access_fields(args: tuple[Any, ...]) -> dict[str, Any]:
    """uvicorn's access line `'%s - "%s %s HTTP/%s" %d'` as fields an operator can filter on."""
    client, method, path, http_version, status = args
    return {"client": client, "method": method, "path": path, "http_version": http_version, "status": status}


def uvicorn_log_config(level: str) -> dict[str, Any]:
    """The `log_config` handed to uvicorn: its error and access lines go out as our JSON lines too."""
    handler = {"class": "logging.StreamHandler", "formatter": "json", "stream": "ext://sys.stderr"}
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"json": {"()": "almanac.logs.JsonFormatter"}},
        "handlers": {"json": handler},
        "loggers": {
            name: {"handlers": ["json"], "level": level.upper(), "propagate": False}
            for name in ("uvicorn", "uvicorn.error", "uvicorn.access")
        },
    }


def configure(level: str, stream: IO[str] | None = None) -> None:
    """JSON lines at `level` on stderr (or `stream`) from every logger."""
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    # The lines carry no thread or process: do not look them up for every record (public switches
    # from the logging HOWTO's "Optimization"; a busy scheduler writes a line per run).
    logging.logThreads = logging.logProcesses = logging.logMultiprocessing = False
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # Alembic narrates every plugin and revision at info; on `make run` that buries the demo
    # credentials. Its warnings and errors still show; `ALMANAC_LOG_LEVEL=debug` shows all.
    if root.level > logging.DEBUG:
        logging.getLogger("alembic").setLevel(logging.WARNING)
