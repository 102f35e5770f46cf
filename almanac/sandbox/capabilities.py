"""What a script may do outside the language: the one registry, and the host's side of it.

``REGISTRY`` lists every host function a script can call (``bootstrap.js`` sends
its ``op``).  The bridge (``_bridge.OPS``), the pool worker's proxy
(``ForwardingCapabilities``) and the parent's dispatch (``REMOTE``) all derive
from it, and each entry's ``check`` is the one place its arguments are validated,
with the one size measure (``json_size``: UTF-8 bytes of the stored JSON).

An entry either *writes* (kv set/delete, emit, schedule.at): the call is buffered
in the run (``effects.RunBuffer``, no message to the host) and applied with the
run's finish; or it is a *remote* read answered by the host's ``Capabilities``
(kv get/list, ``secrets.get``, and ``fetch``, which the host executes), which the
buffer overlays with the run's own writes where it has any (kv).  An entry that
``waits`` (``fetch``) waits on the outside world: the bridge appends the run's
deadline to its arguments and the pool parks the worker while it is out.

The platform supplies one ``Capabilities`` object per tenant and per run; the
sandbox never reaches tenant data any other way, so isolation between tenants
is the platform handing each run the right object.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Callable, Protocol

from .. import jsonsafe
from .contract import Effects

_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)
KV_KEY_MAX = 512  # characters of a kv key (and a kv.list prefix)
TOPIC_MAX = 200
JOB_KEY_MAX = 200
# The root key of a chain of follow-ups that a run other than a job's started ("run:812"): reserved,
# so that no job key can join such a chain by its name.
RUN_CHAIN_PREFIX = "run:"


class CapabilityError(Exception):
    """Bad input from the script; rethrown inside the script as an ``Error``."""


class Capabilities(Protocol):
    """The host's remote calls for ONE tenant and ONE run; synchronous, called on the run's thread.

    ``allowance`` is asked once, on a run's first write that a quota or limit counts
    (see ``effects.RunBuffer``): the tenant's room as committed; None for no limits.
    """

    def kv_get(self, key: str) -> Any | None: ...
    def kv_list(self, prefix: str) -> list[str]: ...
    def allowance(self) -> dict | None: ...
    def secrets_get(self, name: str) -> str | None: ...
    def fetch(self, url: str, method: str | None, headers: list, body: str | None, deadline: float) -> dict:
        """One request (and its redirects), ended by ``deadline`` (``time.monotonic()``, the run's own):
        {status, statusText, url, headers: [[name, value]...], body} or CapabilityError."""
        ...


# --- checks: the one place a script's arguments are validated ---------------------

def _text(name: str, value: Any, most: int, allow_empty: bool = False) -> str:
    if not isinstance(value, str) or (not value and not allow_empty):
        raise CapabilityError(f"{name} must be a non-empty string")
    if len(value) > most:
        raise CapabilityError(f"{name} is over {most} characters")
    try:
        return jsonsafe.check_text(value, name)
    except jsonsafe.Unsafe as exc:
        raise CapabilityError(str(exc)) from None


def stored(what: str, value: Any, limit: int | None = None) -> str:
    """The value's stored JSON text (``jsonsafe``'s rules); CapabilityError if it is not, or over ``limit``."""
    try:
        jsonsafe.check(value, what)
        text = _ENCODER.encode(value)  # jsonsafe.dumps's text, without building an encoder per call
    except jsonsafe.Unsafe as exc:
        raise CapabilityError(str(exc)) from None
    except (RecursionError, TypeError, ValueError):
        raise CapabilityError(f"{what} is not JSON") from None
    if limit is not None:
        size = len(text.encode())
        if size > limit:
            raise CapabilityError(f"{what} is {size} bytes, over the {limit}-byte limit")
    return text


def json_size(value: Any) -> int:
    """The one size measure: UTF-8 bytes of the value's stored (compact, non-ASCII-escaped) JSON."""
    return len(stored("the value", value).encode())


def parse_when(when: Any) -> str:
    """An ISO-8601 instant with an offset (or Z), as ISO UTC with ``Z``."""
    if not isinstance(when, str) or len(when) > 64:
        raise CapabilityError("schedule.at needs an ISO-8601 date-time string")
    try:
        parsed = datetime.fromisoformat(when.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise CapabilityError(f"schedule.at cannot read the date-time {when!r}") from None
    if parsed.tzinfo is None:
        raise CapabilityError("schedule.at needs a date-time with an offset, e.g. 2026-12-01T09:00:00Z")
    if not jsonsafe.DATE_MIN <= parsed <= jsonsafe.DATE_MAX:
        raise CapabilityError(f"schedule.at cannot plan at {when!r}")
    return parsed.astimezone(timezone.utc).isoformat().replace("+00:00", "Z")


def job_key_problem(key: str) -> str | None:
    """Why `key` cannot name a job, or None: the one grammar of job keys (SPEC section 8), for the API's
    routes, its batches, the pages and `schedule.at` alike.

    A key is one path segment of `/api/v1/jobs/{key}` and of the pages' links and forms, so every
    route can address it, percent-encoded: no `/` (a server decodes `%2F` before it routes), not
    `.` or `..` (clients resolve those as segments), no control characters and no surrounding
    spaces (a form could not give them back), and not the prefix of a run's chain.
    """
    if not 1 <= len(key) <= JOB_KEY_MAX:
        return f"a job key is 1 to {JOB_KEY_MAX} characters"
    if "/" in key or key in (".", ".."):
        return "a job key may not contain '/' or be '.' or '..'"
    if any(ord(c) < 32 or ord(c) == 127 for c in key) or key != key.strip():
        return "a job key may not contain control characters or begin or end with a space"
    if key.startswith(RUN_CHAIN_PREFIX):
        return f"a job key may not begin with {RUN_CHAIN_PREFIX!r} (the chains that runs start are named so)"
    return None


def _key(key: Any) -> str:
    return _text("key", key, KV_KEY_MAX)


def _kv_set_args(key: Any, value: Any, limit: int) -> tuple:
    key = _key(key)
    return key, stored(f"kv value for {key!r}", value, limit)


def _emit_args(topic: Any, data: Any, limit: int) -> tuple:
    text = stored("emit data", data, limit)
    return _text("topic", topic, TOPIC_MAX), text


def _schedule_args(when: Any, payload: Any, key: Any, limit: int) -> tuple:
    key = None if key is None else _text("key", key, JOB_KEY_MAX)
    problem = None if key is None else job_key_problem(key)
    if problem:
        raise CapabilityError(f"schedule.at: {problem}")
    text = stored("schedule payload", payload, limit)
    return parse_when(when), text, key


FETCH_BODY_MAX = 1024 * 1024  # request body (UTF-8 bytes); the host measures the response's own
FETCH_URL_MAX = 2048
FETCH_HEADERS_MAX = 64


def _fetch_args(url: Any, method: Any, headers: Any, body: Any, limit: int) -> tuple:
    """Shapes and sizes only; what may be sent where is the host's to decide (the tenant's allowlist)."""
    if not isinstance(url, str) or not url:
        raise CapabilityError("url must be a non-empty string")
    if len(url) > FETCH_URL_MAX:
        raise CapabilityError(f"fetch: the URL is over {FETCH_URL_MAX} characters")
    if method is not None and not isinstance(method, str):
        raise CapabilityError("fetch: the method must be a string")
    if not isinstance(headers, list) or len(headers) > FETCH_HEADERS_MAX or not all(
            isinstance(h, list) and len(h) == 2 and all(isinstance(p, str) for p in h) for h in headers):
        raise CapabilityError(f"fetch: headers must be at most {FETCH_HEADERS_MAX} string names and values")
    if body is not None and not isinstance(body, str):
        raise CapabilityError("fetch: the body must be a string (JSON.stringify an object first)")
    if body is not None and len(body.encode("utf-8", "surrogatepass")) > FETCH_BODY_MAX:
        raise CapabilityError(f"fetch: the request body is over the {FETCH_BODY_MAX}-byte limit")
    return url, method, headers, body


def _secret_name(name: Any, limit: int) -> tuple:
    if not isinstance(name, str) or not name:
        raise CapabilityError("name must be a non-empty string")
    try:  # looked up, not stored, but PostgreSQL cannot compare text holding U+0000 either
        return (jsonsafe.check_text(name, "name"),)
    except jsonsafe.Unsafe as exc:
        raise CapabilityError(str(exc)) from None


def request_cap(kv_value_bytes: int, overhead: int) -> int:
    """The largest capability request the host reads: a kv value or a fetch body, JSON-escaped, plus overhead."""
    return max(kv_value_bytes, 2 * FETCH_BODY_MAX) + overhead


@dataclass(frozen=True)
class Capability:
    """One host function: ``op`` is what the bootstrap sends, ``method`` the name it is served by.

    ``check(*args, value_limit)`` validates the script's arguments (types; values
    measured by ``json_size`` against the run's ``kv_value_bytes``) and returns the
    arguments to serve it with.  ``writes``: True for a buffered write (served by
    ``effects.RunBuffer`` in the run's own process, applied with the run's finish);
    False for a remote call (served by the host's ``Capabilities``, through the
    buffer, which overlays the run's own writes on kv reads).  ``waits`` marks the remote calls
    that wait on the outside world (``fetch``): the bridge appends the run's deadline
    (``time.monotonic()``) to their arguments, and the pool parks the worker (and runs a spare)
    while one is out.
    """

    op: str
    method: str
    check: Callable[..., tuple]
    writes: bool
    waits: bool = False


REGISTRY: tuple[Capability, ...] = (
    Capability("kv.get", "kv_get", lambda key, limit: (_key(key),), writes=False),
    Capability("kv.set", "kv_set", _kv_set_args, writes=True),
    Capability("kv.delete", "kv_delete", lambda key, limit: (_key(key),), writes=True),
    Capability("kv.list", "kv_list", lambda prefix, limit: (_text("prefix", prefix, KV_KEY_MAX, allow_empty=True),),
               writes=False),
    Capability("emit", "emit", _emit_args, writes=True),
    Capability("schedule.at", "schedule_at", _schedule_args, writes=True),
    Capability("secrets.get", "secrets_get", _secret_name, writes=False),
    Capability("fetch", "fetch", _fetch_args, writes=False, waits=True),
)
BY_OP: dict[str, Capability] = {c.op: c for c in REGISTRY}
METHODS: frozenset[str] = frozenset(c.method for c in REGISTRY)
# What the host answers: the remote entries, and the buffer's own question (its allowance).
REMOTE: frozenset[str] = frozenset(c.method for c in REGISTRY if not c.writes) | {"allowance"}
WAITING_METHODS: frozenset[str] = frozenset(c.method for c in REGISTRY if c.waits)


class ForwardingCapabilities:
    """Capabilities that hand every remote call to `_call(method, *args)`: for proxies and adapters.

    Subclasses implement `_call` (answer from another process, translate errors, ...) and
    inherit one method per remote entry of ``REGISTRY``, so the protocol's shape is written down once.
    """

    def _call(self, method: str, *args: Any) -> Any:
        raise NotImplementedError

    if TYPE_CHECKING:  # set below from REGISTRY; declared so a subclass is seen as a Capabilities
        def kv_get(self, key: str) -> Any | None: ...
        def kv_list(self, prefix: str) -> list[str]: ...
        def allowance(self) -> dict | None: ...
        def secrets_get(self, name: str) -> str | None: ...
        def fetch(self, url: str, method: str | None, headers: list, body: str | None, deadline: float) -> dict: ...


def _forwarder(method: str) -> Callable[..., Any]:
    def forward(self: ForwardingCapabilities, *args: Any) -> Any:
        return self._call(method, *args)

    forward.__name__ = method
    return forward


for _method in REMOTE:
    setattr(ForwardingCapabilities, _method, _forwarder(_method))


class NullCapabilities:
    """No storage and no limits: every read is empty (a run's effects are simply not applied)."""

    def kv_get(self, key: str) -> Any | None:
        return None

    def kv_list(self, prefix: str) -> list[str]:
        return []

    def allowance(self) -> dict | None:
        return None

    def secrets_get(self, name: str) -> str | None:
        return None

    def fetch(self, url: str, method: str | None, headers: list, body: str | None, deadline: float) -> dict:
        raise CapabilityError("fetch: no network here")


class InMemoryCapabilities:
    """Dict-backed capabilities for tests and benchmarks; ``apply`` a succeeded run's effects to them.

    Values are stored as JSON copies so a script can never alias host objects.
    """

    def __init__(self, kv: dict[str, Any] | None = None, secrets: dict[str, str] | None = None,
                 fetcher: Callable[..., dict] | None = None) -> None:
        self.kv: dict[str, Any] = dict(kv or {})
        self.secrets = dict(secrets or {})
        self.fetcher = fetcher  # (url, method, headers, body, deadline) -> response dict
        self.emitted: list[tuple[str, Any]] = []
        self.scheduled: dict[str, dict] = {}

    def kv_get(self, key: str) -> Any | None:
        return copy.deepcopy(self.kv.get(key))

    def kv_list(self, prefix: str) -> list[str]:
        return sorted(k for k in self.kv if k.startswith(prefix))

    def allowance(self) -> dict | None:
        return None

    def secrets_get(self, name: str) -> str | None:
        return self.secrets.get(name)

    def fetch(self, url: str, method: str | None, headers: list, body: str | None, deadline: float) -> dict:
        if self.fetcher is None:
            raise CapabilityError("fetch: no network here")
        return self.fetcher(url, method, headers, body, deadline)

    def apply(self, effects: Effects) -> None:
        for key, text in effects.kv.items():
            if text is None:
                self.kv.pop(key, None)
            else:
                self.kv[key] = json.loads(text)
        self.emitted.extend((topic, json.loads(data)) for topic, data in effects.events)
        for key, (when, payload) in effects.jobs.items():
            self.scheduled[key] = {"when": when, "payload": json.loads(payload)}
