"""A dead process's runs in flight go first in a survivor: claimed past its room once it is reaped,
and before the claims it holds (PostgreSQL's claim path across tenants; `liveness` reaps and wakes).

Before, a survivor claimed them only once what it held had drained to half, and queued them behind
that: a second of its work.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from almanac.platform.decisions import slots
from almanac.platform.clock import SystemClock
from almanac.platform.timer.liveness import TAKEN_OVER
from almanac.platform.runner import FunctionRunner
from almanac.platform.store.due_index.claim import DuePass
from almanac.platform.timer.scheduler import Scheduler, across_tenants


class Asked:
    """A store that records what each cross-tenant pass asked for, and finds nothing due."""

    def __init__(self, claims: list[Any] | None = None) -> None:
        self.asked: list[dict[str, Any]] = []
        self.claims = claims or []
        self.full = False
        self.lapsed = 0  # runs of a dead process the next pass recovers (`recorded["lease_lapsed"]`)

    def claim_across(self, now: datetime, limit: int, **kwargs: Any) -> DuePass:
        self.asked.append({"limit": limit, **kwargs})
        claims, self.claims = self.claims, []
        lapsed, self.lapsed = self.lapsed, 0
        return DuePass(claims, len(claims), self.full and bool(claims), [("lease_lapsed", lapsed)] if lapsed else [],
                       None, {})


class Claimed:
    def __init__(self, tenant: str, run_id: int, attempt: int = 1) -> None:
        self.tenant, self.run_id, self.attempt, self.occurrence_id = tenant, run_id, attempt, run_id


def _timer(store: Any) -> Scheduler:
    return across_tenants(store, FunctionRunner(lambda *a: None), SystemClock(), lambda: [], workers=4, index=store)


def test_a_dead_process_reaped_lets_the_next_pass_claim_though_the_process_has_no_room() -> None:
    store = Asked()
    timer = _timer(store)
    with timer._cond:
        timer._inflight = timer.capacity  # full: a pass would wait for room
    timer._claim_pass(datetime.now(timezone.utc))
    assert store.asked == []
    timer.wake(TAKEN_OVER)  # the NOTIFY of a reaping (`liveness`)
    timer._claim_pass(datetime.now(timezone.utc))
    assert len(store.asked) == 1 and store.asked[0]["limit"] >= 1
    timer._claim_pass(datetime.now(timezone.utc))  # once only: then room as before
    assert len(store.asked) == 1


def test_a_retried_attempt_goes_before_what_its_process_holds() -> None:
    store = Asked([Claimed("a", 1), Claimed("b", 2), Claimed("b", 3)])
    timer = _timer(store)
    with timer._cond:  # nothing starts: the queue is what this test reads
        timer._running = 10**6
    timer._claim_pass(datetime.now(timezone.utc))
    store.claims = [Claimed("c", 4), Claimed("b", 5, attempt=2)]
    with timer._cond:
        timer._inflight = 0
    timer._claim_pass(datetime.now(timezone.utc))
    first = timer._fair.pop(10**6, lone=True)
    assert first is not None and (first[0], first[1].run_id) == ("b", 5)


def test_a_fair_queue_puts_items_first_and_their_tenant_next_in_turn() -> None:
    queue: slots.FairQueue[int] = slots.FairQueue(1.0)
    queue.add("a", [1, 2])
    queue.add("b", [3])
    queue.add("b", [4, 5], first=True)
    assert [queue.pop(100) for _ in range(5)] == [("b", 4), ("a", 1), ("b", 5), ("a", 2), ("b", 3)]


def test_while_passes_take_a_dead_process_s_runs_over_the_next_pass_claims_past_its_room_too() -> None:
    store = Asked()
    timer = _timer(store)

    def full_pass() -> None:  # a process with no room, running nothing it claims
        with timer._cond:
            timer._running, timer._inflight = 10**6, timer.capacity
        timer._claim_pass(datetime.now(timezone.utc))

    timer.wake(TAKEN_OVER)
    limit = -(-timer.capacity // timer.path.claimers)
    store.full = True
    store.claims, store.lapsed = [Claimed("a", n, attempt=2) for n in range(limit)], limit
    full_pass()
    # The first took some over: more of the dead process's may be due, past the room again, though
    # this pass also took new work (its lane's pick had fewer of them than the pass's room). Before,
    # only a pass of retries alone went on, and the rest waited for this process's claims to drain.
    store.claims, store.lapsed = [Claimed("a", 200, attempt=2)] + [Claimed("b", 300 + n) for n in range(limit - 1)], 1
    full_pass()
    store.claims = [Claimed("b", 400 + n) for n in range(limit)]
    full_pass()  # the second too
    assert len(store.asked) == 3
    full_pass()  # the third took nothing over: nothing of the dead process's was left; no room as before
    assert len(store.asked) == 3
