"""Structured logs: one JSON object a line, with the event name and the fields passed in `extra`.

Code logs `log.info("run.finished", extra={"event": "run.finished", "run_id": 7, ...})`;
this formatter keeps every such field, so operators can grep or ship the lines as they are.
"""

from __future__ import annotations

import json
import logging
from datetime import datetime, timezone
from typing import Any

# Attributes every LogRecord has; anything else came from `extra`.
_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime", "taskName"}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, timezone.utc).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "event": getattr(record, "event", None) or record.getMessage(),
        }
        for key, value in vars(record).items():
            if key not in _STANDARD and key != "event":
                entry[key] = value
        if record.getMessage() != entry["event"]:
            entry["message"] = record.getMessage()
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


def configure(level: str) -> None:
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # Alembic narrates every plugin and revision at info; on `make run` that buries the demo
    # credentials. Its warnings and errors still show; `ALMANAC_LOG_LEVEL=debug` shows all.
    if root.level > logging.DEBUG:
        logging.getLogger("alembic").setLevel(logging.WARNING)
