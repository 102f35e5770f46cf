"""One run's buffered writes, in the run's own process: no message to the host per write.

``RunBuffer`` serves every registry entry the bridge hands it (arguments already
checked by the entry's ``check``).  Writes are kept here and leave with the run's
result (``contract.Effects``), applied by the platform in the transaction that
records the run, and only if it succeeded.  Reads go to the host's
``Capabilities`` and see the run's own writes over the committed data
(read-your-writes: a ``kv.get`` after a ``kv.set`` answers the new value; a
``kv.list`` shows new keys and hides deleted ones).

Quotas and per-run limits are charged here as the script calls, so that a write
past them rejects inside the script (SPEC sections 3 and 8): the host's
``allowance`` (the tenant's room as committed) is asked once, on the first write
that counts.  A key the run never read is charged as if new (an upper bound);
only when that bound would refuse the write is the key's committed value read, so
a refusal is exact.  The platform checks the quotas again, exactly, when it applies
the effects: concurrent runs may each have fitted alone.
"""

from __future__ import annotations

import json
import uuid
from datetime import datetime
from typing import Any

from .capabilities import Capabilities, CapabilityError, Capability
from .contract import NO_EFFECTS, Effects

MIB = 1024 * 1024


def _when(iso: str) -> datetime:
    return datetime.fromisoformat(iso.replace("Z", "+00:00"))


class RunBuffer:
    """The effects of one run, and the view of the tenant's data it reads through (one thread)."""

    def __init__(self, host: Capabilities) -> None:
        self.host = host
        self.kv: dict[str, str | None] = {}  # key -> stored JSON, None: deleted
        self.events: list[tuple[str, str]] = []
        self.jobs: dict[str, tuple[str, str]] = {}
        self.refused: str | None = None  # a platform limit a call was refused for: the run is not retried
        self._allowance: dict | None = None
        self._asked = False
        self._use: list[int] = [0, 0]  # kv keys, kv bytes: committed, plus this run's writes as charged
        self._charged: dict[str, int | None] = {}  # key -> its size as charged by this run (None: absent)
        self._committed: dict[str, int | None] = {}  # key -> its committed size, where known (None: absent)

    def effects(self) -> Effects:
        if not (self.kv or self.events or self.jobs):
            return NO_EFFECTS  # most runs write nothing: no new (frozen, so slow to build) Effects
        return Effects(dict(self.kv), tuple(self.events), dict(self.jobs))

    def serve(self, capability: Capability, args: tuple) -> Any:
        own = getattr(self, capability.method, None)
        if own is not None:
            return own(*args)
        return getattr(self.host, capability.method)(*args)  # a remote call the buffer does not overlay

    # -- reads, through the run's own writes ---------------------------------------------

    def kv_get(self, key: str) -> Any:
        if key in self.kv:
            text = self.kv[key]
            return None if text is None else json.loads(text)
        value = self.host.kv_get(key)
        if key not in self._committed:
            self._committed[key] = None if value is None else _size(key, json.dumps(
                value, ensure_ascii=False, separators=(",", ":")))
        return value

    def kv_list(self, prefix: str) -> list[str]:
        keys = set(self.host.kv_list(prefix))
        for key, text in self.kv.items():
            if key.startswith(prefix):
                (keys.discard if text is None else keys.add)(key)
        return sorted(keys)

    # -- writes, buffered -------------------------------------------------------------------

    def kv_set(self, key: str, text: str) -> None:
        self._charge(key, _size(key, text))
        self.kv[key] = text

    def kv_delete(self, key: str) -> None:
        if key in self._charged:
            self._charge(key, None)
        self.kv[key] = None

    def emit(self, topic: str, data: str) -> None:
        allowance = self._room()
        most = allowance.get("emits") if allowance else None
        if most is not None and len(self.events) >= most:
            self.refused = f"a run may emit at most {most} events"
            raise CapabilityError(self.refused)
        self.events.append((topic, data))

    def schedule_at(self, run_at: str, payload: str, key: str | None) -> dict[str, Any]:
        key = key or "job-" + uuid.uuid4().hex
        allowance = self._room()
        if allowance:
            self._check_plan(allowance, key, run_at)
        self.jobs[key] = (run_at, payload)
        return {"key": key, "runAt": run_at}

    # -- limits ------------------------------------------------------------------------------

    def _room(self) -> dict | None:
        if not self._asked:
            self._asked = True
            self._allowance = self.host.allowance()
            if self._allowance:
                self._use = [int(self._allowance.get("kv_keys_used", 0)), int(self._allowance.get("kv_bytes_used", 0))]
        return self._allowance

    def _check_plan(self, allowance: dict, key: str, run_at: str) -> None:
        made = len(self.jobs) - (1 if key in self.jobs else 0)
        plans, chain, chain_max = allowance.get("plans"), allowance.get("chain"), allowance.get("chain_max")
        problem = None
        if plans is not None and made >= plans:
            problem = f"a run may plan at most {plans} jobs"
        elif chain is not None and chain_max is not None and len(set(chain) | set(self.jobs) | {key}) > chain_max:
            problem = f"a chain of jobs from one root may hold at most {chain_max} jobs in all"
        if problem:
            self.refused = problem
            raise CapabilityError(problem)
        latest = allowance.get("latest")
        if latest is not None and _when(run_at) > _when(latest):
            raise CapabilityError(f"a job may be planned at most {allowance.get('ahead_days')} days ahead")
        jobs, used = allowance.get("pending_jobs"), allowance.get("pending_jobs_used", 0)
        if jobs is not None and key not in self.jobs and used + len(self.jobs) + 1 > jobs:
            raise CapabilityError(f"quota_exceeded: the tenant's quota of {jobs} pending jobs is used up")

    def _charge(self, key: str, size: int | None) -> None:
        """Charge a write of ``size`` bytes (None: a delete) to the kv quotas, or refuse it."""
        allowance = self._room()
        if not allowance or allowance.get("kv_keys") is None:
            return
        for exact in (False, True):
            if key in self._charged:
                before = self._charged[key]
            elif key in self._committed:
                before = self._committed[key]
            elif exact:
                self.kv_get(key)  # the committed value, read only now that the bound would refuse
                before = self._committed.get(key)
            else:
                before = None  # the upper bound: as if the key were new
            keys = self._use[0] + (size is not None) - (before is not None)
            used = self._use[1] + (size or 0) - (before or 0)
            problem = _over(allowance, keys, used)
            if problem is None or size is None:
                self._use = [keys, used]
                self._charged[key] = size
                return
            if key in self._charged or key in self._committed:
                break  # the bound was exact already
        raise CapabilityError(f"quota_exceeded: {problem}")


def _size(key: str, text: str) -> int:
    """What a kv entry counts against the quota: UTF-8 bytes of its key and its stored JSON."""
    return len(key.encode()) + len(text.encode())


def _over(allowance: dict, keys: int, used: int) -> str | None:
    if keys > allowance["kv_keys"]:
        return f"The tenant's quota of {allowance['kv_keys']} kv keys is used up."
    if used > allowance["kv_bytes"]:
        return f"The tenant's quota of {allowance['kv_bytes'] // MIB} MiB of kv data is used up."
    return None
