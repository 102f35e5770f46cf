"""The one way into the run slots for runs the timer does not claim itself: run now, run again, a trial.

Such a run is claimed by `Store.claim_manual` (its row written `running` with a lease, the
tenant's daily budgets checked and counted in that transaction) and handed to the timer's
own fair queue (`Scheduler.enqueue`): the same run limit, the same shares between tenants,
the same recorder and fence as a scheduled run. Its deadline is the sandbox's, counted from
when its script starts. Whoever asked waits on a `Future` that is set once the run is
recorded; nothing here blocks a thread while the script runs.

A trial (a schedule page's "Try with payload", a script page's "Try draft") is such a run with
trigger `trial`: it counts against the daily budgets and is recorded as a run (status, output,
logs, fetches), but what it would change (kv, events, jobs) is only handed back to be shown,
never applied. A trial may run a draft `source` in place of the script's saved version; only a
trial may, so unsaved text can never have effects.

Each tenant may have at most `waiting_max` of these waiting at once in this process; past it
`RateLimited`, with the seconds after which one of them should have ended.
"""

from __future__ import annotations

import dataclasses
import math
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from almanac.errors import RateLimited
from almanac.platform.runner import storable
from almanac.platform.store.contract import Claim
from almanac.sandbox.contract import RunResult

TRIAL = "trial"
# A waiting place whose run should have ended this long ago is taken back (its request was cut off
# before it could give it back): past the longest lease margin a waiting request allows for.
STALE_PLACE_S = 120.0


@dataclass
class Admitted:
    """One admitted run: its claim, and a future set (to the run's full result, or None when it
    never ended) once it is recorded or given up."""

    claim: Claim
    done: Future[RunResult | None] = field(default_factory=Future)
    event_extra: dict[str, Any] = field(default_factory=dict)
    result: RunResult | None = None  # as it ended, effects included (a trial's are not applied)


class Admission:
    """Admits runs into the timer's slots and tells their callers when they are recorded."""

    def __init__(self, store: Any, scheduler: Any, waiting_max: int) -> None:
        self.store, self.scheduler, self.waiting_max = store, scheduler, waiting_max
        self._lock = threading.Lock()
        self._runs: dict[tuple[str, int], Admitted] = {}
        self._waiting: dict[str, list[float]] = {}  # tenant -> when each waiting run should end (monotonic)

    def ensure_room(self, tenant: str) -> None:
        """RateLimited if the tenant has no waiting place free now: a refusal that costs no database work."""
        now = time.monotonic()
        with self._lock:
            self._refuse_if_full(tenant, now)

    def hold(self, tenant: str, timeout_ms: int) -> float:
        """Take one of the tenant's waiting places (RateLimited when none is free); give it back with `leave`."""
        now = time.monotonic()
        with self._lock:
            ends = self._refuse_if_full(tenant, now)
            end = now + timeout_ms / 1000
            ends.append(end)
            self._waiting[tenant] = ends
            return end

    def _refuse_if_full(self, tenant: str, now: float) -> list[float]:
        """(Holding the lock.) The tenant's waiting places, stale ones dropped; RateLimited when all are taken."""
        ends = [end for end in self._waiting.get(tenant, []) if end > now - STALE_PLACE_S]
        if len(ends) >= self.waiting_max:
            retry = max(1, math.ceil(min(ends) - now))
            raise RateLimited(
                f"This tenant already has {len(ends)} runs started from the API or a page waiting to "
                f"finish; try again in {retry} s.", details={"retry_after_s": retry})
        return ends

    def leave(self, tenant: str, place: float) -> None:
        with self._lock:
            ends = self._waiting.get(tenant, [])
            if place in ends:
                ends.remove(place)
            if not ends:
                self._waiting.pop(tenant, None)

    def admit(self, tenant: str, script_id: int, payload: Any, now: datetime, *, trigger: str = "manual",
              event_extra: dict[str, Any] | None = None, source: str | None = None) -> Admitted:
        """Claim a run of the script now (QuotaExceeded past the daily budgets) and queue it to start.

        `source`, for a trial only, is run in place of the saved version (the run row still names
        the saved version the draft was edited from)."""
        if source is not None and trigger != TRIAL:
            raise ValueError("only a trial may run a draft source")
        claim = self.store.claim_manual(tenant, script_id, payload, now, trigger=trigger)
        if source is not None:
            claim = dataclasses.replace(claim, source=source)
        admitted = Admitted(claim, event_extra=dict(event_extra or {}))
        with self._lock:
            self._runs[(tenant, claim.run_id)] = admitted
        self.scheduler.enqueue([claim])
        return admitted

    # -- the timer's RunWatcher --------------------------------------------------------

    def event(self, claim: Claim, event: dict[str, Any]) -> dict[str, Any]:
        admitted = self._runs.get((claim.tenant, claim.run_id))
        return {**event, **admitted.event_extra} if admitted is not None and admitted.event_extra else event

    def ended(self, claim: Claim, result: RunResult) -> RunResult:
        admitted = self._runs.get((claim.tenant, claim.run_id))
        if admitted is None:
            return result
        admitted.result = storable(result)
        if claim.trigger != TRIAL:
            return result
        effects = admitted.result.effects
        return dataclasses.replace(admitted.result, effects=dataclasses.replace(effects, kv={}, events=(), jobs={})
                                   if effects else effects)

    def released(self, claims: list[Claim]) -> None:
        with self._lock:
            found = [self._runs.pop((c.tenant, c.run_id), None) for c in claims]
        for admitted in found:
            if admitted is not None and not admitted.done.done():
                admitted.done.set_result(admitted.result)
