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

from almanac.platform import policies

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
    try:
        text = json.dumps(value, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise CapabilityError(f"{what} must be JSON: {exc}") from None
    if len(text.encode()) > limit:
        raise CapabilityError(f"{what} is over {limit // 1024} KiB")
    return text


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
        job_root: str | None = None,
        chain: Callable[[str], set[str]] | None = None,
    ) -> None:
        self._read, self._keys = read, keys
        self._now, self._job_depth = now, job_depth
        # A job's run: its follow-ups join the chain of `job_root`, whose jobs' keys `chain` reads (once).
        self._job_root, self._chain = job_root, chain
        self._chain_keys: set[str] | None = None
        self.refused: str | None = None  # the platform limit a call was refused for: the run is not retried
        self.kv: dict[str, Any] = {}  # key -> JSON text, or _DELETED
        self.events: list[tuple[str, str]] = []
        self.jobs: dict[str, JobUpsert] = {}

    # -- kv ------------------------------------------------------------------------

    @staticmethod
    def _check_key(key: Any) -> str:
        if not isinstance(key, str) or not key or len(key) > KV_KEY_MAX:
            raise CapabilityError(f"a kv key must be a non-empty string of at most {KV_KEY_MAX} characters")
        return key

    def kv_get(self, key: str) -> Any:
        key = self._check_key(key)
        if key in self.kv:
            value = self.kv[key]
            return None if value is _DELETED else json.loads(value)
        return self._read(key)

    def kv_set(self, key: str, value: Any) -> None:
        self.kv[self._check_key(key)] = _dumps(value, "a kv value", KV_VALUE_MAX)

    def kv_delete(self, key: str) -> None:
        self.kv[self._check_key(key)] = _DELETED

    def kv_list(self, prefix: str = "") -> list[str]:
        if not isinstance(prefix, str) or len(prefix) > KV_KEY_MAX:
            raise CapabilityError("kv.list needs a string prefix")
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
        if not isinstance(topic, str) or not topic or len(topic) > TOPIC_MAX:
            raise CapabilityError(f"emit needs a topic of 1-{TOPIC_MAX} characters")
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
        if not isinstance(key, str) or not key or len(key) > JOB_KEY_MAX:
            raise CapabilityError(f"a job key must be a string of 1-{JOB_KEY_MAX} characters")
        made = len(self.jobs) - (1 if key in self.jobs else 0)
        problem = policies.follow_up_problem(self._chain_size(key), run_at, self._now, made)
        if problem:
            if "days ahead" not in problem:  # a limit of the platform, not a mistake of the call
                self.refused = problem
            raise CapabilityError(problem)
        self.jobs[key] = JobUpsert(key, run_at, _dumps(payload, "a job payload", KV_VALUE_MAX))
        return {"key": key, "runAt": run_at.isoformat().replace("+00:00", "Z")}
