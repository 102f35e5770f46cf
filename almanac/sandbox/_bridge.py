"""The capability bridge: one JSON request in, one JSON reply out, per host call.

The guest's bootstrap (``bootstrap.js``) calls the reactor's ``call`` import
with ``[op, [args...]]``; the host replies ``{"v": value}`` or
``{"e": "message"}`` (thrown in the script as an ``Error``).  ``OPS`` is the
complete list of what a script can ask the host for, derived from
``capabilities.REGISTRY``; a meta-test checks that every entry has a test.
Each request is checked by its entry's ``check`` and served by the run's
``effects.RunBuffer``: writes stay in it, reads go through it to the host.

Parsing is linear and total: ``loads`` refuses NaN/Infinity and nesting
deeper than Python's parser takes (a ValueError, never a RecursionError), so
nothing a script hands over can break the host.
"""

from __future__ import annotations

import json
import logging
import re
import time
from itertools import accumulate
from typing import Any

from .capabilities import BY_OP, Capabilities, CapabilityError, Capability
from .effects import RunBuffer
from .limits import Limits

log = logging.getLogger("almanac.sandbox")

OPS: dict[str, Capability] = dict(BY_OP)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


# Built once: json.loads/dumps with options build a new decoder/encoder per call (measurable per host call).
_DECODER = json.JSONDecoder(parse_constant=_no_constant)
_ENCODER = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"))
_NULL_REPLY = b'{"v":null}'  # what every buffered write answers

MAX_DEPTH = 256  # nesting a value may have: every process that parses it again has room to spare
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_BRACKET = re.compile(r"[\[\]{}]")


def depth(text: str) -> int:
    """How deeply the JSON ``text`` nests (linear; called only when it might be deep)."""
    steps = (1 if c in "[{" else -1 for c in _BRACKET.findall(_STRING.sub("", text)))
    return max(accumulate(steps), default=0)


class NestedTooDeeply(ValueError):
    """JSON nested past ``MAX_DEPTH``: the one malformed request whose reason a script can act on."""


def loads(data: bytes | str) -> Any:
    """Strict JSON: ValueError for anything that is not (NaN, Infinity, too deep, bad UTF-8).

    Nesting is capped at ``MAX_DEPTH`` so that a value this process parsed can be parsed
    again by the next (the pool's parent wraps it in a message: Python's parser would
    raise RecursionError there, in the reactor thread, on a value nested just deep enough).
    """
    try:
        if isinstance(data, bytes):
            data = data.decode("utf-8", "surrogatepass")
        if data.count("[") + data.count("{") > MAX_DEPTH and depth(data) > MAX_DEPTH:
            raise NestedTooDeeply("nested too deeply")
        return _DECODER.decode(data)
    except RecursionError:
        raise NestedTooDeeply("nested too deeply") from None
    except UnicodeDecodeError as exc:
        raise ValueError(str(exc)) from None


def dumps(value: Any) -> str:
    """The stored form: compact, non-ASCII kept, no NaN; ValueError if ``value`` cannot be."""
    try:
        return _ENCODER.encode(value)
    except RecursionError:
        raise NestedTooDeeply("nested too deeply") from None
    except TypeError as exc:
        raise ValueError(str(exc)) from None


class Bridge:
    """Serves one run's requests: checked here, buffered or forwarded by ``buffer``.

    ``may`` (the request's) names the ops this run may call; None: all of ``OPS``.
    """

    def __init__(self, caps: Capabilities, limits: Limits, may: frozenset[str] | None = None) -> None:
        self.buffer = RunBuffer(caps)
        self.limits = limits
        self.ops = OPS if may is None else {op: c for op, c in OPS.items() if op in may}
        # Built as the run starts (runtime.Sandbox.execute): the run's own deadline, which a call
        # that waits on the outside world (`fetch`) must end by. CLOCK_MONOTONIC is system-wide,
        # so the pool's parent, which executes the call, reads the same clock.
        self.deadline = time.monotonic() + limits.timeout_ms / 1000

    def handle(self, request: bytes) -> bytes:
        try:
            op, args = loads(request)
            capability = self.ops[op]
            if not isinstance(args, list):
                raise TypeError
        except (ValueError, TypeError, KeyError) as exc:
            # Say why only when it is the script's to fix (a value nested too deeply); else just refuse.
            deep = isinstance(exc, NestedTooDeeply)
            return _reply(error="malformed request: nested too deeply" if deep else "malformed request")
        try:
            checked = capability.check(*args, self.limits.kv_value_bytes)
            if capability.waits:
                checked = (*checked, self.deadline)
            value = self.buffer.serve(capability, checked)
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


def _reply(value: Any = None, error: str | None = None) -> bytes:
    if value is None and error is None:
        return _NULL_REPLY
    return dumps({"e": error} if error is not None else {"v": value}).encode("utf-8", "surrogatepass")
