"""The claim contract (`ClaimPath`) and its two implementations; `timer.Scheduler` holds one.

A claim path is how a timer finds due work, claims it, keeps its leases and records its
finished runs. The timer owns everything else (run slots, the fair queue, the runner, the
recorder thread, the lease-renewal thread) and its one claim loop:

    for scope in path.due(now, held):         which parts of the due work to claim now, in order
        limit = path.room(scope, held)        how much (holding the timer's lock)
        claimed = path.claim(scope, now, limit, share)
        path.claimed(scope, claimed, now)     when to look at that part again
    at, wakeable = path.next_look(now)        sleep until then, or until a wake-up

- `PerTenant` (SQLite, and PostgreSQL run with tenant leases): a scope is a tenant. It keeps a
  wake time per tenant (the tenants whose timer leases this process holds) and claims each in
  its own transaction (`Store.claim_due`).
- `AcrossTenants` (PostgreSQL): one scope, every tenant. A pass claims up to the room of due
  work of any tenant from the shared due index (`DueIndex.claim_across`), fairly between
  tenants, in one transaction; every process claims from the same index.

Both claim through the store's per-tenant decisions, so every policy (misfire, overlap, expiry,
retries, quotas) is the same on both; the contract suite (tests/integration/platform, whose
policy tests run on both paths) holds them to it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol

from almanac.platform.decisions import pacing, slots
from almanac.platform.store.contract import Claim, ClaimBatch, Store
from almanac.platform.store.due_index.claim import DuePass, DueIndex
from almanac.platform.store.record import Finish
from almanac.platform.timer.liveness import TAKEN_OVER

log = logging.getLogger("almanac.scheduler")

ACROSS = ""  # `AcrossTenants`' one scope: every tenant


@dataclass(frozen=True)
class Pace:
    """How fast the timer's runs go, for how much it may hold claimed (`ClaimPath.capacity`)."""

    run_limit: int  # runs handed to the runner at once (`slots.run_limit`)
    parallel: int  # runs that really execute at once
    avg_run_s: float | None  # the runs' average own time (None before the first ended)
    ends_per_s: float | None  # runs this process has seen end a second lately (`pacing.EndRate`)


class Holdings(Protocol):
    """What the timer holds, as a claim path reads it: only while holding the timer's lock."""

    @property
    def share(self) -> float:
        """A tenant's share of the slots while others want them too."""
        ...

    @property
    def inflight(self) -> int:
        """Runs claimed and not yet recorded."""
        ...

    @property
    def unrecorded(self) -> int:
        """Of those, the ones that ended and wait for the recorder."""
        ...

    @property
    def due_together(self) -> int:
        """Scopes found due in the current pass (several: shares apply from the first)."""
        ...

    @property
    def capacity(self) -> int: ...

    @property
    def run_limit(self) -> int: ...

    def held(self, tenant: str) -> int:
        """The tenant's runs claimed and not yet recorded."""
        ...

    def unfinished(self, tenant: str) -> int:
        """The tenant's runs claimed and not yet ended."""
        ...

    def holders(self) -> int:
        """Tenants holding any claim."""
        ...


Claimed = ClaimBatch | DuePass


class ClaimPath(Protocol):
    """The claim contract. Any number of processes may use it for the same tenants at once: the
    database decides who runs what, and every claim, renewal and record is a transaction."""

    claimers: int  # threads the timer runs the claim loop on (each asks `due` in turn)

    def capacity(self, pace: Pace) -> int:
        """The most runs the timer may hold claimed and not yet ended: what its slots start soon.
        A claim held waits for a slot while another process may be free, so hold little."""
        ...

    def due(self, now: datetime, held: Holdings) -> list[str]:
        """The scopes to claim now, in the order to claim them (called holding the timer's lock)."""
        ...

    def room(self, scope: str, held: Holdings) -> int:
        """How many runs to claim for `scope` now; 0: none, wait for room to come back
        (`room_back`). Called holding the timer's lock; the timer counts the room as in
        flight until `claim` returns."""
        ...

    def claim(self, scope: str, now: datetime, limit: int, share: float) -> Claimed:
        """Claim up to `limit` due occurrences of `scope` in one transaction: each claimed one is
        `running` with a lease held by this process, its run row written and its schedule's next
        occurrence planned, all or none; what did not run (skipped, expired, recovered) is
        recorded in the same transaction. Never claims an occurrence another claim holds."""
        ...

    def claimed(self, scope: str, claimed: Claimed, now: datetime) -> dict[str, int] | None:
        """Note what a claim of `scope` found, for `next_look`; the tenants' backlogs when they
        changed (for the metrics), else None."""
        ...

    def starved(self, scope: str, now: datetime) -> None:
        """`room` was 0 for `scope`: look again once `room_back` says so."""
        ...

    def room_back(self, held: Holdings, now: datetime) -> bool:
        """Runs ended or were recorded: whether a scope that found no room should be claimed now
        (called holding the timer's lock)."""
        ...

    def next_look(self, now: datetime) -> tuple[datetime, bool]:
        """When to claim again, and whether a wake-up (`wake`) may bring that forward."""
        ...

    def wake(self, tenant: str, at: datetime) -> None:
        """Something changed for `tenant` (a schedule, a job, a run recorded): claim it at the first
        look from `at` on (called holding the timer's lock)."""
        ...

    def renew(self, claims: Sequence[Claim], now: datetime) -> set[tuple[str, int]]:
        """Extend these claims' leases, each only while its lease token still holds its occurrence;
        the (tenant, run id) of those another process took over (this one was paused past them)."""
        ...

    def record(self, finished: Sequence[Finish]) -> list[bool | None]:
        """Record these finished attempts, each fenced by its lease token: per item, True when it
        applied, False when its lease was lost (nothing of it applied), None when it could not be
        recorded here (the caller records it alone)."""
        ...

    def claim_now(self, tenant: str, now: datetime, limit: int, share: float) -> Claimed:
        """`claim` of what is due now, for a caller that runs it in its own thread (tests with a
        manual clock): `tenant` for the per-tenant path, any for the other."""
        ...


def record_per_tenant(store: Store, finished: Sequence[Finish]) -> list[bool | None]:
    """Record finished attempts a transaction per tenant (`Store.finish_many`); None for the
    items of a tenant whose transaction failed (logged), to be recorded one by one."""
    applied: list[bool | None] = [None] * len(finished)
    by_tenant: dict[str, list[int]] = {}
    for i, item in enumerate(finished):
        by_tenant.setdefault(item[0].tenant, []).append(i)
    for where in by_tenant.values():
        try:
            got = store.finish_many([finished[i] for i in where])
        except Exception:  # one bad record (an effect the database refuses, say) costs only its own run
            log.exception("run.batch_record_failed", extra={"event": "run.batch_record_failed", "runs": len(where)})
            continue
        for i, ok in zip(where, got):
            applied[i] = ok
    return applied


class PerTenant:
    """Claims tenant by tenant, each in its own transaction, at the time each next needs it."""

    claimers = 1  # its wake times are its own: one claim loop

    def __init__(self, store: Store, tenants: Callable[[], Iterable[str]], *, idle: timedelta,
                 tenants_every: timedelta) -> None:
        self.store, self.tenants = store, tenants
        self.idle, self.tenants_every = idle, tenants_every
        self._wakes: dict[str, datetime] = {}  # tenant -> when it next needs a claim
        self._starved: set[str] = set()  # found no room: woken by `room_back`
        self._served: dict[str, int] = {}  # tenant -> when it last claimed (a counter): least recent first
        self._serial = 0
        self._backlogs: dict[str, int] = {}
        self._next_tenants: datetime | None = None

    def capacity(self, pace: Pace) -> int:
        return slots.CLAIM_AHEAD * pace.run_limit

    def due(self, now: datetime, held: Holdings) -> list[str]:
        if self._next_tenants is None or now >= self._next_tenants:
            self._refresh_tenants(now)
            self._next_tenants = now + self.tenants_every
        due = [t for t, at in self._wakes.items() if at <= now]
        # Tenants with nothing in hand go first (their due work waits on nobody), then the one that
        # claimed least recently, so that when room is short (a herd at the top of the hour) every
        # tenant's turn comes round.
        return sorted(due, key=lambda t: (held.held(t) > 0, self._served.get(t, 0)))

    def _refresh_tenants(self, now: datetime) -> None:
        try:
            known = set(self.tenants())
        except Exception:
            log.exception("scheduler.tenants_failed", extra={"event": "scheduler.tenants_failed"})
            return
        for tenant in known - self._wakes.keys():
            self._wakes[tenant] = now
        for tenant in self._wakes.keys() - known:
            del self._wakes[tenant]
            self._backlogs.pop(tenant, None)

    def room(self, scope: str, held: Holdings) -> int:
        """Within the capacity (runs that ended count until recorded, up to twice it: the recorder
        lingers to batch them) and, once the claims drained to half, up to the tenant's share of
        it, and of the recorder's backlog, while other tenants hold claims (alone, it may take
        all). A tenant with nothing in hand may always claim its share of the run slots: its
        due work then waits on nobody, whatever the others hold."""
        return _tenant_room(scope, held, held.holders())

    def claim(self, scope: str, now: datetime, limit: int, share: float) -> Claimed:
        self._serial += 1
        self._served[scope] = self._serial
        return self.store.claim_due(scope, now, limit)

    def claimed(self, scope: str, claimed: Claimed, now: datetime) -> dict[str, int] | None:
        if claimed.full:
            self._wakes[scope] = now
            return None
        assert isinstance(claimed, ClaimBatch)
        known = claimed.backlog is not None
        backlog = claimed.backlog if claimed.backlog is not None else self.store.backlog(scope, now)
        due = claimed.next_due_at if known else self.store.next_due_at(scope)
        self._wakes[scope] = min(due, now + self.idle) if due is not None else now + self.idle
        if self._backlogs.get(scope) == backlog:
            return None
        self._backlogs[scope] = backlog
        return dict(self._backlogs)

    def starved(self, scope: str, now: datetime) -> None:
        self._starved.add(scope)
        self._wakes[scope] = now + self.idle

    def room_back(self, held: Holdings, now: datetime) -> bool:
        if not self._starved or held.inflight >= 2 * held.capacity:
            return False
        holders = held.holders()
        ready = [t for t in self._starved if _tenant_room(t, held, holders) > 0]
        for tenant in ready:
            self._wakes[tenant] = now
            self._starved.discard(tenant)
        return bool(ready)

    def next_look(self, now: datetime) -> tuple[datetime, bool]:
        return min([*self._wakes.values(), self._next_tenants or now, now + self.idle]), True

    def wake(self, tenant: str, at: datetime) -> None:
        self._wakes[tenant] = at

    def renew(self, claims: Sequence[Claim], now: datetime) -> set[tuple[str, int]]:
        by_tenant: dict[str, list[Claim]] = {}
        for claim in claims:
            by_tenant.setdefault(claim.tenant, []).append(claim)
        lost: set[tuple[str, int]] = set()
        for tenant, mine in by_tenant.items():
            try:
                lost |= {(tenant, run_id) for run_id in self.store.renew_leases(tenant, mine, now)}
            except Exception:  # the next round tries again; the lease margin covers a round or two
                log.exception("run.lease_renewal_failed", extra={"event": "run.lease_renewal_failed", "tenant": tenant})
        return lost

    def record(self, finished: Sequence[Finish]) -> list[bool | None]:
        return record_per_tenant(self.store, finished)

    def claim_now(self, tenant: str, now: datetime, limit: int, share: float) -> Claimed:
        return self.store.claim_due(tenant, now, limit)


def _tenant_room(tenant: str, held: Holdings, holders: int) -> int:
    """`PerTenant.room`, with the count of tenants holding claims given (a loop over many tenants counts once)."""
    capacity, unfinished, mine = held.capacity, held.inflight - held.unrecorded, held.unfinished(tenant)
    own = held.held(tenant)
    floor = slots.share_of(held.run_limit, held.share) if own == 0 else 0
    others = holders - (own > 0) > 0 or held.due_together > 1
    share = held.share if others else 1.0  # others hold claims, or are due too: shares apply
    room = min(slots.claim_room(capacity, unfinished, mine, share), 2 * capacity - held.inflight,
               slots.share_of(2 * capacity, share) - own)
    if not slots.wants_refill(capacity, unfinished, mine, share):
        room = 0
    return max(room, floor)


class AcrossTenants:
    """Claims across tenants from the shared due index (PostgreSQL): one pass, one transaction.

    Needs no tenant list and no tenant leases: every process claims from the same index,
    `FOR UPDATE SKIP LOCKED`, and in the round robin's one order, so a tenant's place in a burst
    does not depend on which process is busy or dead. A pass claims only once the process's
    unfinished work drained to half its capacity (`pacing.cross_room`), each of `claimers`
    threads its part, so that one transaction serves many runs.
    """

    def __init__(self, index: DueIndex, store: Store, *, idle: timedelta,
                 tenant_exists: Callable[[str], bool] | None = None, claim_ahead: int | None = None,
                 claimers: int = pacing.CLAIMERS) -> None:
        self.index, self.store, self.idle = index, store, idle
        self.tenant_exists = tenant_exists
        self.claim_ahead = claim_ahead  # claims held per run slot; None: `pacing.held_claims`
        self.claimers = max(1, claimers)
        self._room_wanted = False  # a pass found no room: room coming back wakes the loop
        self._taken_over = False  # a dead process's runs were made due: the next pass claims without room
        self._looks = threading.local()  # each claimer's own next look (`next_look`)
        self._backlogs: dict[str, int] = {}

    def capacity(self, pace: Pace) -> int:
        if self.claim_ahead:
            return self.claim_ahead * pace.run_limit
        return pacing.held_claims(pace.avg_run_s, pace.parallel, pace.run_limit, pace.ends_per_s)

    def due(self, now: datetime, held: Holdings) -> list[str]:
        return [ACROSS]

    def room(self, scope: str, held: Holdings) -> int:
        # Each claimer takes its part of the room, so that the others have some to claim at once.
        part = -(-held.capacity // self.claimers)
        if self._taken_over:  # they come first in the pick (`policies.REAPED_AHEAD`) and were started once already
            self._taken_over = False
            return part
        return min(pacing.cross_room(held.capacity, held.inflight, held.unrecorded), part)

    def claim(self, scope: str, now: datetime, limit: int, share: float) -> Claimed:
        return self.index.claim_across(now, limit, share=share, tenant_exists=self.tenant_exists)

    def claimed(self, scope: str, claimed: Claimed, now: datetime) -> dict[str, int] | None:
        assert isinstance(claimed, DuePass)
        # A pass that took a dead process's runs over (they come first): more may be left, the next takes
        # them too, room or not, rather than as this process's own claims drain to half.
        if dict(claimed.recorded).get("lease_lapsed"):
            self._taken_over = True
        self._looks.at = pacing.next_look(claimed.full, claimed.picked, claimed.next_due_at, now, self.idle)
        if claimed.full or claimed.backlog is None or claimed.backlog == self._backlogs:
            return None
        self._backlogs = dict(claimed.backlog)
        return self._backlogs

    def starved(self, scope: str, now: datetime) -> None:
        self._room_wanted = True
        self._looks.at = (now + self.idle, True)

    def room_back(self, held: Holdings, now: datetime) -> bool:
        if self._room_wanted and pacing.cross_room(held.capacity, held.inflight, held.unrecorded) > 0:
            self._room_wanted = False
            return True
        return False

    def next_look(self, now: datetime) -> tuple[datetime, bool]:
        look: tuple[datetime, bool] | None = getattr(self._looks, "at", None)
        self._looks.at = None
        return look or (now + timedelta(seconds=1), True)  # None: this claimer's pass failed

    def wake(self, tenant: str, at: datetime) -> None:
        """One look at the whole index: a NOTIFY names a tenant, but the pass takes every tenant's due
        work; `liveness.TAKEN_OVER` (a dead process's runs made due) claims them past the room."""
        if tenant == TAKEN_OVER:
            self._taken_over = True

    def renew(self, claims: Sequence[Claim], now: datetime) -> set[tuple[str, int]]:
        """In one transaction across tenants: with hundreds of tenants in flight, a transaction each
        took longer than the leases it renewed."""
        return self.index.renew_across(claims, now)

    def record(self, finished: Sequence[Finish]) -> list[bool | None]:
        """A transaction per lane for every tenant (`DueIndex.finish_across`); what it did not record
        (an attempt had lost its lease, so it rolled back; or it failed) a transaction per tenant."""
        try:
            across = self.index.finish_across(finished)
        except Exception:
            log.exception("run.batch_record_failed", extra={"event": "run.batch_record_failed", "runs": len(finished)})
            across = None
        applied: list[bool | None] = list(across) if across is not None else [None] * len(finished)
        again = [i for i, ok in enumerate(applied) if ok is None]
        if again:
            for i, ok in zip(again, record_per_tenant(self.store, [finished[i] for i in again])):
                applied[i] = ok
        return applied

    def claim_now(self, tenant: str, now: datetime, limit: int, share: float) -> Claimed:
        return self.claim(ACROSS, now, limit, share)
