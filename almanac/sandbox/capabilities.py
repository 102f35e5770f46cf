"""The host side of what a script may do outside the language.

The platform supplies one ``Capabilities`` object per tenant and per run; the
sandbox never reaches tenant data any other way, so isolation between tenants
is the platform handing each run the right object.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Protocol


class CapabilityError(Exception):
    """Bad input from the script; rethrown inside the script as an ``Error``."""


class Capabilities(Protocol):
    """Host functions for ONE tenant and ONE run; synchronous, called on the run's thread."""

    def kv_get(self, key: str) -> Any | None: ...
    def kv_set(self, key: str, value: Any) -> None: ...
    def kv_delete(self, key: str) -> None: ...
    def kv_list(self, prefix: str) -> list[str]: ...
    def emit(self, topic: str, data: Any) -> None: ...
    def schedule_at(self, when: str, payload: Any, key: str | None) -> dict: ...
    def secrets_get(self, name: str) -> str | None: ...
    def fetch(self, url: str, method: str | None, headers: list, body: str | None, deadline: float) -> dict:
        """One request (and its redirects), ended by ``deadline`` (``time.monotonic()``, the run's own):
        {status, statusText, url, headers: [[name, value]...], body} or CapabilityError."""
        ...


# --- the registry: every host function a script may call -------------------------

def _text(name: str, value: Any, allow_empty: bool = False) -> str:
    if not isinstance(value, str) or (not value and not allow_empty):
        raise CapabilityError(f"{name} must be a non-empty string")
    return value


def json_size(value: Any) -> int:
    """The one size measure: UTF-8 bytes of the value's stored (compact, non-ASCII-escaped) JSON."""
    try:
        text = json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    except RecursionError:
        raise CapabilityError("the value is nested too deeply") from None
    except (TypeError, ValueError):
        raise CapabilityError("the value is not JSON") from None
    return len(text.encode("utf-8", "surrogatepass"))


def _sized(what: str, value: Any, limit: int) -> Any:
    size = json_size(value)
    if size > limit:
        raise CapabilityError(f"{what} is {size} bytes, over the {limit}-byte limit")
    return value


def _kv_set_args(key: Any, value: Any, limit: int) -> tuple:
    key = _text("key", key)
    return key, _sized(f"kv value for {key!r}", value, limit)


def _emit_args(topic: Any, data: Any, limit: int) -> tuple:
    data = _sized("emit data", data, limit)
    return _text("topic", topic), data


def _schedule_args(when: Any, payload: Any, key: Any, limit: int) -> tuple:
    key = None if key is None else _text("key", key)
    payload = _sized("schedule payload", payload, limit)
    return _text("when", when), payload, key


FETCH_BODY_MAX = 1024 * 1024  # request body (UTF-8 bytes); the host measures the response's own
FETCH_URL_MAX = 2048
FETCH_HEADERS_MAX = 64


def _fetch_args(url: Any, method: Any, headers: Any, body: Any, limit: int) -> tuple:
    """Shapes and sizes only; what may be sent where is the host's to decide (the tenant's allowlist)."""
    url = _text("url", url)
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


def request_cap(kv_value_bytes: int, overhead: int) -> int:
    """The largest capability request the host reads: a kv value or a fetch body, JSON-escaped, plus overhead."""
    return max(kv_value_bytes, 2 * FETCH_BODY_MAX) + overhead


@dataclass(frozen=True)
class Capability:
    """One host function: ``op`` is what the bootstrap sends, ``method`` the ``Capabilities`` method.

    ``check(*args, value_limit)`` validates the script's arguments (types; values
    measured by ``json_size`` against the run's ``kv_value_bytes``) and returns
    the arguments to call ``method`` with.  ``writes`` marks the calls that
    change state (kv set/delete, emit, schedule).  ``waits`` marks the calls that wait on the
    outside world (``fetch``): the bridge appends the run's deadline (``time.monotonic()``) to
    their arguments, and the pool parks the worker (and runs a spare) while one is out.
    """

    op: str
    method: str
    check: Callable[..., tuple]
    writes: bool
    waits: bool = False


REGISTRY: tuple[Capability, ...] = (
    Capability("kv.get", "kv_get", lambda key, limit: (_text("key", key),), writes=False),
    Capability("kv.set", "kv_set", _kv_set_args, writes=True),
    Capability("kv.delete", "kv_delete", lambda key, limit: (_text("key", key),), writes=True),
    Capability("kv.list", "kv_list", lambda prefix, limit: (_text("prefix", prefix, allow_empty=True),),
               writes=False),
    Capability("emit", "emit", _emit_args, writes=True),
    Capability("schedule.at", "schedule_at", _schedule_args, writes=True),
    Capability("secrets.get", "secrets_get", lambda name, limit: (_text("name", name),), writes=False),
    Capability("fetch", "fetch", _fetch_args, writes=False, waits=True),
)
BY_OP: dict[str, Capability] = {c.op: c for c in REGISTRY}
METHODS: frozenset[str] = frozenset(c.method for c in REGISTRY)
WAITING_METHODS: frozenset[str] = frozenset(c.method for c in REGISTRY if c.waits)


class ForwardingCapabilities:
    """Capabilities that hand every call to `_call(method, *args)`: for proxies and adapters.

    Subclasses implement `_call` (answer from another process, translate errors, ...) and
    inherit one method per entry of ``REGISTRY``, so the protocol's shape is written down once.
    """

    def _call(self, method: str, *args: Any) -> Any:
        raise NotImplementedError

    if TYPE_CHECKING:  # set below from REGISTRY; declared so a subclass is seen as a Capabilities
        def kv_get(self, key: str) -> Any | None: ...
        def kv_set(self, key: str, value: Any) -> None: ...
        def kv_delete(self, key: str) -> None: ...
        def kv_list(self, prefix: str) -> list[str]: ...
        def emit(self, topic: str, data: Any) -> None: ...
        def schedule_at(self, when: str, payload: Any, key: str | None) -> dict: ...
        def secrets_get(self, name: str) -> str | None: ...
        def fetch(self, url: str, method: str | None, headers: list, body: str | None, deadline: float) -> dict: ...


def _forwarder(method: str) -> Callable[..., Any]:
    def forward(self: ForwardingCapabilities, *args: Any) -> Any:
        return self._call(method, *args)

    forward.__name__ = method
    return forward


for _capability in REGISTRY:
    setattr(ForwardingCapabilities, _capability.method, _forwarder(_capability.method))


class NullCapabilities:
    """No storage, no effects: every read is empty and every write is dropped."""

    def kv_get(self, key: str) -> Any | None:
        return None

    def kv_set(self, key: str, value: Any) -> None:
        return None

    def kv_delete(self, key: str) -> None:
        return None

    def kv_list(self, prefix: str) -> list[str]:
        return []

    def emit(self, topic: str, data: Any) -> None:
        return None

    def schedule_at(self, when: str, payload: Any, key: str | None) -> dict:
        return {"key": key or "", "run_at": when}

    def secrets_get(self, name: str) -> str | None:
        return None

    def fetch(self, url: str, method: str | None, headers: list, body: str | None, deadline: float) -> dict:
        raise CapabilityError("fetch: no network here")


class InMemoryCapabilities:
    """Dict-backed capabilities for tests and benchmarks.

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

    def kv_set(self, key: str, value: Any) -> None:
        if not key:
            raise CapabilityError("kv key must not be empty")
        self.kv[key] = json.loads(json.dumps(value))

    def kv_delete(self, key: str) -> None:
        self.kv.pop(key, None)

    def kv_list(self, prefix: str) -> list[str]:
        return sorted(k for k in self.kv if k.startswith(prefix))

    def emit(self, topic: str, data: Any) -> None:
        if not topic:
            raise CapabilityError("emit needs a topic")
        self.emitted.append((topic, data))

    def schedule_at(self, when: str, payload: Any, key: str | None) -> dict:
        key = key or f"job-{len(self.scheduled) + 1}"
        self.scheduled[key] = {"when": when, "payload": payload}
        return {"key": key, "run_at": when}

    def secrets_get(self, name: str) -> str | None:
        return self.secrets.get(name)

    def fetch(self, url: str, method: str | None, headers: list, body: str | None, deadline: float) -> dict:
        if self.fetcher is None:
            raise CapabilityError("fetch: no network here")
        return self.fetcher(url, method, headers, body, deadline)
