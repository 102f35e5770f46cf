"""The host side of what a script may do outside the language.

The platform supplies one ``Capabilities`` object per tenant and per run; the
sandbox never reaches tenant data any other way, so isolation between tenants
is the platform handing each run the right object.
"""

from __future__ import annotations

import copy
import json
from typing import Any, Protocol


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


class ForwardingCapabilities:
    """Capabilities that hand every call to `_call(method, *args)`: for proxies and adapters.

    Subclasses implement `_call` (answer from another process, translate errors, ...) and
    inherit the six methods, so the protocol's shape is written down once.
    """

    def _call(self, method: str, *args: Any) -> Any:
        raise NotImplementedError

    def kv_get(self, key: str) -> Any | None:
        return self._call("kv_get", key)

    def kv_set(self, key: str, value: Any) -> None:
        self._call("kv_set", key, value)

    def kv_delete(self, key: str) -> None:
        self._call("kv_delete", key)

    def kv_list(self, prefix: str) -> list[str]:
        return self._call("kv_list", prefix)

    def emit(self, topic: str, data: Any) -> None:
        self._call("emit", topic, data)

    def schedule_at(self, when: str, payload: Any, key: str | None) -> dict:
        return self._call("schedule_at", when, payload, key)


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


class InMemoryCapabilities:
    """Dict-backed capabilities for tests and benchmarks.

    Values are stored as JSON copies so a script can never alias host objects.
    """

    def __init__(self, kv: dict[str, Any] | None = None) -> None:
        self.kv: dict[str, Any] = dict(kv or {})
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
