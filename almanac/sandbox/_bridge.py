"""The capability bridge: one JSON request line in, one JSON reply line out.

The guest's bootstrap (``bootstrap.js``) writes ``[op, [args...]]``; the host
replies ``{"v": value}`` or ``{"e": "message"}`` (thrown in the script as an
``Error``).  ``OPS`` is the complete list of what a script can ask the host
for; a meta-test checks that every entry has a test.
"""

from __future__ import annotations

import json
import logging
from typing import Any, Callable

from .capabilities import Capabilities, CapabilityError
from .limits import Limits

log = logging.getLogger("almanac.sandbox")


class Bridge:
    """Serves one run's requests against that run's capabilities."""

    def __init__(self, caps: Capabilities, limits: Limits) -> None:
        self.caps = caps
        self.limits = limits
        self.result_json: str | None = None  # the script's output as JSON text
        self.error: dict | None = None  # {name, message, stack} of an uncaught error
        self.finished = False

    def handle(self, line: bytes) -> bytes:
        try:
            op, args = json.loads(line.decode("utf-8", "surrogatepass"))
            handler = OPS[op]
            if not isinstance(args, list):
                raise TypeError
        except Exception:
            return _reply(error="malformed request")
        try:
            value = handler(self, *args)
        except CapabilityError as exc:
            return _reply(error=str(exc) or "capability error")
        except TypeError as exc:
            return _reply(error=f"{op}: bad arguments ({exc})")
        except Exception:  # a platform bug must not kill the run silently
            log.exception("sandbox.capability_failed", extra={"op": op})
            return _reply(error=f"{op} failed in the host")
        try:
            return _reply(value=value)
        except ValueError:
            return _reply(error=f"{op} returned a value that is not JSON")

    def size_of(self, value: Any) -> int:
        # surrogatepass: a lone surrogate is measured here and refused by the host's own check, by name
        return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "surrogatepass"))

    def check_size(self, what: str, value: Any) -> None:
        size, limit = self.size_of(value), self.limits.kv_value_bytes
        if size > limit:
            raise CapabilityError(f"{what} is {size} bytes, over the {limit}-byte limit")


def _reply(value: Any = None, error: str | None = None) -> bytes:
    body = {"e": error} if error is not None else {"v": value}
    return json.dumps(body, ensure_ascii=False, allow_nan=False).encode("utf-8", "surrogatepass")


def _text(name: str, value: Any, allow_empty: bool = False) -> str:
    if not isinstance(value, str) or (not value and not allow_empty):
        raise CapabilityError(f"{name} must be a non-empty string")
    return value


# --- the operations ----------------------------------------------------------

def _kv_get(b: Bridge, key: Any) -> Any:
    return b.caps.kv_get(_text("key", key))


def _kv_set(b: Bridge, key: Any, value: Any) -> None:
    key = _text("key", key)
    b.check_size(f"kv value for {key!r}", value)
    b.caps.kv_set(key, value)


def _kv_delete(b: Bridge, key: Any) -> None:
    b.caps.kv_delete(_text("key", key))


def _kv_list(b: Bridge, prefix: Any) -> list[str]:
    return list(b.caps.kv_list(_text("prefix", prefix, allow_empty=True)))


def _emit(b: Bridge, topic: Any, data: Any) -> None:
    b.check_size("emit data", data)
    b.caps.emit(_text("topic", topic), data)


def _schedule_at(b: Bridge, when: Any, payload: Any, key: Any) -> dict:
    if key is not None:
        key = _text("key", key)
    b.check_size("schedule payload", payload)
    return b.caps.schedule_at(_text("when", when), payload, key)


def _result(b: Bridge, output_json: Any) -> None:
    # Only the first outcome counts: a script that writes to the bridge fd
    # itself can only talk about its own run.
    if not b.finished and isinstance(output_json, str):
        b.result_json, b.finished = output_json, True


def _error(b: Bridge, error: Any) -> None:
    if not b.finished and isinstance(error, dict):
        b.error, b.finished = error, True


# Every op the guest can call.  The first six are the script's capabilities
# (almanac.kv.*, almanac.emit, almanac.schedule.at); the last two are used by
# the bootstrap to report how the run ended.
OPS: dict[str, Callable[..., Any]] = {
    "kv.get": _kv_get,
    "kv.set": _kv_set,
    "kv.delete": _kv_delete,
    "kv.list": _kv_list,
    "emit": _emit,
    "schedule.at": _schedule_at,
    "result": _result,
    "error": _error,
}
