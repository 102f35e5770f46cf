"""The child side of ``SandboxPool``: one process, one ``Sandbox``, one pipe.

Messages are JSON arrays sent with ``send_bytes`` (never pickle, so the
parent never unpickles anything a worker wrote):

parent -> worker   ``["run", source, event, limits]`` | ``["check", source]``
                   ``["v", value]`` | ``["e", message]`` | ``["x", message]``
                   (the answer to a capability call)
worker -> parent   ``["ready"]`` once, then per request any number of
                   ``["cap", method, args]`` followed by exactly one
                   ``["done", result]`` | ``["checked", problem or null]``

A capability call blocks the guest until the parent answers, exactly as the
in-process bridge does; the parent executes it on the caller's ``caps``, so
tenant data and host objects never enter this process.  The worker exits when
the parent closes its end of the pipe.
"""

from __future__ import annotations

import json
import logging
import signal
from pathlib import Path
from typing import Any

from .capabilities import CapabilityError, ForwardingCapabilities
from .limits import Limits
from .runtime import RunResult, Sandbox

CAP_METHODS = frozenset({"kv_get", "kv_set", "kv_delete", "kv_list", "emit", "schedule_at"})
RESULT_FIELDS = ("status", "output", "error", "error_line", "error_column", "logs",
                 "duration_ms", "error_stack")


def dump(message: list) -> bytes:
    # ASCII output: lone surrogates in sources and logs survive as \\u escapes.
    return json.dumps(message, allow_nan=False, separators=(",", ":")).encode()


class HostFailure(Exception):
    """The parent's capability call failed for a reason the script must not see."""


class ParentCaps(ForwardingCapabilities):
    """``Capabilities`` whose every call is answered by the parent process."""

    def __init__(self, conn: Any) -> None:
        self._conn = conn

    def _call(self, method: str, *args: Any) -> Any:
        self._conn.send_bytes(dump(["cap", method, list(args)]))
        kind, value = json.loads(self._conn.recv_bytes())
        if kind == "v":
            return value
        if kind == "e":
            raise CapabilityError(value)
        raise HostFailure(value)


def main(conn: Any, cache_dir: str) -> None:
    """Entry point of a worker process (the pool's ``Process`` target)."""
    # Ctrl-C reaches the whole process group; the parent decides when we stop.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # The parent logs failed capability calls with their traceback; the
    # bridge's copy of the same failure here would only be noise on stderr.
    bridge_log = logging.getLogger("almanac.sandbox")
    bridge_log.addHandler(logging.NullHandler())
    bridge_log.propagate = False
    with Sandbox(Path(cache_dir)) as box:
        caps = ParentCaps(conn)
        conn.send_bytes(dump(["ready"]))
        while True:
            try:
                request = json.loads(conn.recv_bytes())
            except EOFError:
                return
            conn.send_bytes(dump(_serve(box, caps, request)))


def _serve(box: Sandbox, caps: ParentCaps, request: list) -> list:
    if request[0] == "run":
        _, source, event, limits = request
        result = box.run(source, event, Limits(**limits), caps)
        return ["done", {name: getattr(result, name) for name in RESULT_FIELDS}]
    problem = box.check_syntax(request[1])
    return ["checked", None if problem is None else
            {"message": problem.message, "line": problem.line, "column": problem.column}]


def result_from(fields: Any) -> RunResult:
    """A worker's ``done`` payload as a ``RunResult``; ValueError if it is not one."""
    try:
        result = RunResult(**{name: fields[name] for name in RESULT_FIELDS})
    except (KeyError, TypeError) as exc:
        raise ValueError("malformed result") from exc
    if result.status not in ("succeeded", "failed", "timed_out", "memory_exceeded"):
        raise ValueError("malformed result")
    return result
