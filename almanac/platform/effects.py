"""A run's capabilities, buffered: what a script does is applied only if its run succeeds.

`RunEffects` has the method names of the sandbox's Capabilities protocol. kv
reads see the run's own writes over the committed data; writes, deletes, emits
and `schedule.at` upserts are kept in memory and handed to `Store.finish`, which
applies them in the transaction that records the run as succeeded, and only if
the run still holds its lease. A failed or timed-out run applies nothing.

Bad input raises `CapabilityError` (the worker turns it into the sandbox's own
error class, which becomes a JavaScript exception).
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Callable

from almanac import jsonsafe
from almanac.errors import QuotaExceeded
from almanac.platform import policies, quotas

KV_KEY_MAX = 512
KV_VALUE_MAX = 64 * 1024
TOPIC_MAX = 200
EVENT_DATA_MAX = 64 * 1024
JOB_KEY_MAX = 200
MAX_EMITS_PER_RUN = 100
_DELETED = object()


class CapabilityError(Exception):
    """A script called a capability with input it may not use."""


@dataclass(frozen=True)
class JobUpsert:
    key: str
    run_at: datetime
    payload_json: str


def _dumps(value: Any, what: str, limit: int) -> str:
    """Stored JSON text, checked by `almanac.jsonsafe` as API input is (the same rules, the same measure)."""
    try:
        return jsonsafe.dumps(value, what, limit)
    except jsonsafe.Unsafe as exc:
        raise CapabilityError(str(exc)) from None


def _text(value: Any, what: str, limit: int) -> str:
    if not isinstance(value, str) or not value or len(value) > limit:
        raise CapabilityError(f"{what} must be a non-empty string of at most {limit} characters")
    try:
        return jsonsafe.check_text(value, what)
    except jsonsafe.Unsafe as exc:
        raise CapabilityError(str(exc)) from None


def parse_when(when: Any) -> datetime:
    """An ISO-8601 instant with an offset (or Z), as aware UTC."""
    if not isinstance(when, str) or len(when) > 64:
        raise CapabilityError("schedule.at needs an ISO-8601 date-time string")
    try:
        parsed = datetime.fromisoformat(when.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise CapabilityError(f"schedule.at cannot read the date-time {when!r}") from None
    if parsed.tzinfo is None:
        raise CapabilityError("schedule.at needs a date-time with an offset, e.g. 2026-12-01T09:00:00Z")
    return parsed.astimezone(timezone.utc)


class RunEffects:
    """The capabilities object of one run (one thread: no locking needed)."""

    def __init__(
        self,
        read: Callable[[str], Any],
        keys: Callable[[str], list[str]],
        *,
        now: datetime,
        job_depth: int | None,
        quota: Callable[[], tuple[quotas.Quotas, int, int, int]] | None = None,
        job_root: str | None = None,
        chain: Callable[[str], set[str]] | None = None,
        tenant: str | None = None,
    ) -> None:
        self._read, self._keys = read, keys
        self.tenant = tenant  # whose run: the runner finds the tenant's egress allowlist and secrets by it
        self._now, self._job_depth = now, job_depth
        # Quotas: (quotas, kv keys, kv bytes, pending jobs) as committed, read on the first write that
        # counts; then the run's own writes are charged on top (`_charged`: bytes per key it set).
        self._quota = quota
        self._state: list[Any] | None = None
        self._charged: dict[str, int] = {}
        # A job's run: its follow-ups join the chain of `job_root`, whose jobs' keys `chain` reads (once).
        self._job_root, self._chain = job_root, chain
        self._chain_keys: set[str] | None = None
        self.refused: str | None = None  # the platform limit a call was refused for: the run is not retried
        self.kv: dict[str, Any] = {}  # key -> JSON text, or _DELETED
        self.events: list[tuple[str, str]] = []
        self.jobs: dict[str, JobUpsert] = {}
        self.http: list[dict[str, Any]] = []  # the run's fetches, set by the runner; recorded whatever the status

    # -- kv ------------------------------------------------------------------------

    @staticmethod
    def _check_key(key: Any) -> str:
        return _text(key, "a kv key", KV_KEY_MAX)

    def kv_get(self, key: str) -> Any:
        key = self._check_key(key)
        if key in self.kv:
            value = self.kv[key]
            return None if value is _DELETED else json.loads(value)
        return self._read(key)

    def kv_set(self, key: str, value: Any) -> None:
        key = self._check_key(key)
        text = _dumps(value, "a kv value", KV_VALUE_MAX)
        self._charge_kv(key, len(key.encode()) + len(text.encode()))
        self.kv[key] = text

    def kv_delete(self, key: str) -> None:
        self.kv[self._check_key(key)] = _DELETED
        if key in self._charged and self._state is not None:
            self._state[2] -= self._charged.pop(key)
            self._state[1] -= 1

    def _quota_state(self) -> list[Any] | None:
        if self._state is None and self._quota is not None:
            self._state = list(self._quota())
        return self._state

    def _charge_kv(self, key: str, size: int) -> None:
        """Refuse a write past the kv quotas (committed use + this run's writes); a key's old value is credited."""
        state = self._quota_state()
        if state is None:
            return
        limits, keys, used = state[0], state[1], state[2]
        if key in self._charged:
            old, new_key = self._charged[key], False
        else:
            committed = self._read(key)
            new_key = committed is None
            old = 0 if new_key else len(key.encode()) + len(jsonsafe.dumps(committed).encode())
        keys, used = keys + new_key, used - old + size
        try:
            quotas.check_kv(limits, keys, used)
        except QuotaExceeded as exc:
            raise CapabilityError(f"quota_exceeded: {exc.message}") from None
        state[1], state[2] = keys, used
        self._charged[key] = size

    def kv_list(self, prefix: str = "") -> list[str]:
        if not isinstance(prefix, str) or len(prefix) > KV_KEY_MAX:
            raise CapabilityError("kv.list needs a string prefix")
        if prefix:
            _text(prefix, "a kv prefix", KV_KEY_MAX)
        keys = set(self._keys(prefix))
        for key, value in self.kv.items():
            if key.startswith(prefix):
                (keys.discard if value is _DELETED else keys.add)(key)
        return sorted(keys)

    def kv_changes(self) -> tuple[dict[str, str], list[str]]:
        """(writes as key -> JSON text, deleted keys) for the store."""
        writes = {k: v for k, v in self.kv.items() if v is not _DELETED}
        return writes, [k for k, v in self.kv.items() if v is _DELETED]

    # -- emit and schedule.at --------------------------------------------------------

    def emit(self, topic: str, data: Any = None) -> None:
        _text(topic, "an event topic", TOPIC_MAX)
        if len(self.events) >= MAX_EMITS_PER_RUN:
            self.refused = f"a run may emit at most {MAX_EMITS_PER_RUN} events"
            raise CapabilityError(self.refused)
        self.events.append((topic, _dumps(data, "event data", EVENT_DATA_MAX)))

    def _chain_size(self, key: str) -> int:
        """Jobs the chain would hold with `key` in it: its root's jobs and this run's follow-ups."""
        if self._job_root is None or self._chain is None:
            return 1  # a schedule's (or a manual) run: each follow-up starts its own chain
        if self._chain_keys is None:
            self._chain_keys = set(self._chain(self._job_root))
        return len(self._chain_keys | set(self.jobs) | {key})

    def schedule_at(self, when: str, payload: Any = None, key: str | None = None) -> dict[str, Any]:
        run_at = parse_when(when)
        if key is None:
            key = "job-" + uuid.uuid4().hex
        _text(key, "a job key", JOB_KEY_MAX)
        made = len(self.jobs) - (1 if key in self.jobs else 0)
        problem = policies.follow_up_problem(self._chain_size(key), run_at, self._now, made)
        if problem:
            if "days ahead" not in problem:  # a limit of the platform, not a mistake of the call
                self.refused = problem
            raise CapabilityError(problem)
        state = self._quota_state()
        if state is not None and key not in self.jobs and state[3] + len(self.jobs) + 1 > state[0].pending_jobs:
            raise CapabilityError(f"quota_exceeded: the tenant's quota of {state[0].pending_jobs} pending jobs "
                                  "is used up")
        self.jobs[key] = JobUpsert(key, run_at, _dumps(payload, "a job payload", KV_VALUE_MAX))
        return {"key": key, "runAt": run_at.isoformat().replace("+00:00", "Z")}
