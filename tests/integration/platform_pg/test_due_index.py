"""The cross-tenant due index (PostgreSQL): kept by the occurrences' own transactions, claimed across tenants.

Each test would fail on the code before there was no index, and the timer
claimed tenant by tenant (a process knew only the tenants it held a timer lease for).
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from sqlalchemy import select, text

from almanac.db import Database
from almanac.platform.store import planning
from almanac.platform.store.coordination_models import DueEntry
from almanac.platform.store.models import DONE, Job, Occurrence, Run, Script, ScriptVersion
from almanac.sandbox.contract import RunResult
from almanac.platform.store.due_index.claim import DueIndex
from almanac.platform.store.sql_store import SqlStore
from tests.integration.platform.scheduler_world import EveryRules

pytestmark = pytest.mark.postgres

D = DueEntry.__table__


def _indexed(store: SqlStore, index: type[DueIndex]) -> SqlStore:
    """`store` with its due index replaced by an instance of `index` (a subclass that watches it)."""
    store.due_index = index(store.db, store.claims, store.records, store.lanes)
    return store


def _script(db: Database, slug: str, now: datetime) -> int:
    with db.tenant_session(slug) as s:
        script = Script(name="s", current_version=1, timeout_ms=1000, memory_mb=32, created_at=now, updated_at=now)
        s.add(script)
        s.flush()
        s.add(ScriptVersion(script_id=script.id, version=1, source="export default () => 1", created_at=now))
        return script.id


def _jobs(db: Database, slug: str, script_id: int, when: datetime, count: int, prefix: str = "j") -> None:
    with db.tenant_session(slug) as s:
        for i in range(count):
            planning.upsert_job(s, f"{prefix}{i}", dict(script_id=script_id, run_at=when, payload=json.dumps(i),
                                                        expire_after_s=None, max_attempts=2, priority=0), now=when)


def _index(db: Database) -> dict[tuple[str, int], datetime]:
    with db.shared_session() as s:
        return {(r.tenant_slug, r.occurrence_id): r.due_at for r in s.execute(select(D))}


def _mirror(db: Database, slugs: list[str]) -> dict[tuple[str, int], datetime]:
    """What the index should hold: every occurrence with a due_at, of every tenant."""
    want = {}
    for slug in slugs:
        with db.tenant_session(slug) as s:
            for oid, due in s.execute(select(Occurrence.id, Occurrence.due_at).where(Occurrence.due_at.is_not(None))):
                want[(slug, oid)] = due
    return want


@pytest.fixture
def tenants(make_tenant: Callable[..., str]) -> list[str]:
    return [make_tenant(f"due-{i}") for i in range(3)]


def test_the_index_follows_every_write_of_occurrences_in_the_same_transaction(
        database: Database, tenants: list[str], now: datetime) -> None:
    store = SqlStore(database, EveryRules())
    sid = _script(database, tenants[0], now)
    _jobs(database, tenants[0], sid, now + timedelta(minutes=5), 3)
    assert _index(database) == _mirror(database, tenants) and len(_index(database)) == 3
    with database.tenant_session(tenants[0]) as s:  # moved, cancelled: the index moves with it
        planning.upsert_job(s, "j0", dict(script_id=sid, run_at=now + timedelta(minutes=9), payload="null",
                                          expire_after_s=None, max_attempts=2, priority=5), now=now)
        planning.cancel_job(s, s.execute(select(Job).where(Job.key == "j1")).scalar_one(), now)
    index = _index(database)
    assert index == _mirror(database, tenants) and len(index) == 2
    assert now + timedelta(minutes=9) in index.values()
    try:  # a write that rolls back leaves the index as it was
        with database.tenant_session(tenants[0]) as s:
            s.execute(Occurrence.__table__.delete())
            raise RuntimeError("rolled back")
    except RuntimeError:
        pass
    assert _index(database) == index
    # Claimed: due_at is the lease end; finished for good: gone from the index.
    batch = store.due_index.claim_across(now + timedelta(minutes=6), 10)
    assert [c.job_key for c in batch.claims] == ["j2"] and _index(database) == _mirror(database, tenants)
    claim = batch.claims[0]
    assert _index(database)[(tenants[0], claim.occurrence_id)] == claim.lease_until
    done = RunResult("succeeded", output=1, duration_ms=1)
    assert store.finish(claim, done, now, now + timedelta(minutes=6))
    assert (tenants[0], claim.occurrence_id) not in _index(database)
    assert _index(database) == _mirror(database, tenants)


def test_one_claim_takes_the_due_work_of_many_tenants_and_never_reads_an_idle_one(
        database: Database, tenants: list[str], now: datetime) -> None:
    store = SqlStore(database, EveryRules())
    for i, slug in enumerate(tenants[:2]):
        _jobs(database, slug, _script(database, slug, now), now, 4 + i)
    idle = tenants[2]
    _jobs(database, idle, _script(database, idle, now), now + timedelta(hours=1), 5)
    with database.engine.begin() as conn:  # an idle tenant whose schema is unreadable would fail the claim
        conn.execute(text("ALTER TABLE t_due_2.occurrences RENAME TO occurrences_hidden"))
    batch = store.due_index.claim_across(now, 100)
    assert not batch.failed and not batch.full
    assert Counter(c.tenant for c in batch.claims) == {tenants[0]: 4, tenants[1]: 5}
    # Next to look at: the claims' own lease ends (were this process to die), not the idle tenant's hour.
    assert batch.next_due_at == min(c.lease_until for c in batch.claims) and batch.backlog == {}


def test_two_processes_claim_disjoint_rows_and_skip_what_the_other_holds(
        database: Database, tenants: list[str], now: datetime) -> None:
    a, b = SqlStore(database, EveryRules()), SqlStore(database, EveryRules())
    for slug in tenants:
        _jobs(database, slug, _script(database, slug, now), now, 10)
    with database.engine.connect() as other, other.begin():  # a claim of the other process, in flight
        held = other.execute(text("SELECT tenant_slug, occurrence_id FROM due_index ORDER BY tenant_slug, "
                                  "occurrence_id LIMIT 12 FOR UPDATE")).all()
        first = a.due_index.claim_across(now, 100)
    assert len(first.claims) == 18 and not {(c.tenant, c.occurrence_id) for c in first.claims} & set(held)
    second = b.due_index.claim_across(now, 100)
    assert len(second.claims) == 12 and {(c.tenant, c.occurrence_id) for c in second.claims} == set(held)
    assert b.due_index.claim_across(now, 100).claims == []


def test_a_tenant_with_one_due_run_is_claimed_in_the_first_pass_while_another_has_hundreds_queued(
        database: Database, tenants: list[str], now: datetime) -> None:
    store = SqlStore(database, EveryRules())
    noisy, quiet = tenants[0], tenants[1]
    _jobs(database, noisy, _script(database, noisy, now), now - timedelta(minutes=5), 300)  # older, all due
    _jobs(database, quiet, _script(database, quiet, now), now, 1)
    batch = store.due_index.claim_across(now, 20, share=0.5)
    by = Counter(c.tenant for c in batch.claims)
    assert by[quiet] == 1 and by[noisy] == 19 and batch.full
    assert batch.backlog is None  # full: the timer comes straight back


def test_round_robin_between_tenants_due_at_the_same_time(
        database: Database, tenants: list[str], now: datetime) -> None:
    store = SqlStore(database, EveryRules())
    for slug in tenants:
        _jobs(database, slug, _script(database, slug, now), now, 50)
    batch = store.due_index.claim_across(now, 60, share=0.5)
    by = Counter(c.tenant for c in batch.claims)
    # Round robin in chunks of 8: every tenant's first 8, its next 8, then the rest of the pass (12),
    # a chunk and a part, to tenants in turn; none above its share (30) while the others wait.
    assert sorted(by.values()) == [16, 20, 24] and set(by) == set(tenants)


def test_a_dead_process_s_due_work_is_claimed_by_another_at_once_and_its_running_attempts_after_their_lease(
        database: Database, tenants: list[str], now: datetime) -> None:
    dead, alive = SqlStore(database, EveryRules()), SqlStore(database, EveryRules())
    for slug in tenants:
        _jobs(database, slug, _script(database, slug, now), now, 5)
    taken = dead.due_index.claim_across(now, 6).claims  # then kill -9: never finished, never renewed
    rest = alive.due_index.claim_across(now + timedelta(seconds=1), 100).claims
    assert len(taken) == 6 and len(rest) == 9  # the unclaimed due work: at once, no tenant lease to wait for
    done = RunResult("succeeded", output=1, duration_ms=1)
    for claim in rest:
        assert alive.finish(claim, done, now, now + timedelta(seconds=2))
    assert alive.due_index.claim_across(now + timedelta(seconds=3), 100).claims == []  # the dead one's leases still hold
    lapse = max(c.lease_until for c in taken) + timedelta(seconds=1)
    again = alive.due_index.claim_across(lapse, 100)
    assert dict(again.recorded) == {"lease_lapsed": 6}
    assert sorted((c.tenant, c.occurrence_id) for c in again.claims) == sorted(
        (c.tenant, c.occurrence_id) for c in taken)
    assert all(c.attempt == 2 for c in again.claims)
    for claim in again.claims:
        assert alive.finish(claim, done, now, lapse)
    for claim in taken:  # the dead process's late record is fenced
        assert not dead.finish(claim, done, now, lapse)
    for slug in tenants:
        with database.tenant_session(slug) as s:
            assert {o.status for o in s.execute(select(Occurrence)).scalars()} == {DONE}
            ok = Counter(r.occurrence_id for r in s.execute(select(Run).where(Run.status == "succeeded")).scalars())
            assert len(ok) == 5 and set(ok.values()) == {1}
    assert _index(database) == {}


def test_the_rows_of_a_tenant_that_is_gone_are_dropped(database: Database, tenants: list[str], now: datetime) -> None:
    store = SqlStore(database, EveryRules())
    _jobs(database, tenants[0], _script(database, tenants[0], now), now, 3)
    with database.engine.begin() as conn:  # as a restore without the trigger, or a schema dropped by hand
        conn.execute(text("DROP SCHEMA t_due_0 CASCADE"))
    batch = store.due_index.claim_across(now, 10, tenant_exists=lambda slug: False)
    assert batch.failed == [tenants[0]] and batch.claims == []
    assert _index(database) == {}


def test_leases_of_many_tenants_are_renewed_in_one_transaction_and_a_lost_one_is_named(
        database: Database, tenants: list[str], now: datetime) -> None:
    store = SqlStore(database, EveryRules())
    for slug in tenants:
        _jobs(database, slug, _script(database, slug, now), now, 2)
    claims = store.due_index.claim_across(now, 100).claims
    done = RunResult("succeeded", output=1, duration_ms=1)
    assert store.finish(claims[0], done, now, now)  # recorded meanwhile: no longer held
    later = now + timedelta(seconds=20)
    assert store.due_index.renew_across(claims, later) == {(claims[0].tenant, claims[0].run_id)}
    index = _index(database)
    for c in claims[1:]:  # the lease, and the index with it, now end 31 s after `later`
        assert index[(c.tenant, c.occurrence_id)] == later + timedelta(seconds=31)


def test_the_cross_tenant_timer_runs_every_tenant_s_due_work_once_and_stops_clean(
        database: Database, tenants: list[str]) -> None:
    from almanac.platform.clock import SystemClock
    from almanac.platform.runner import FunctionRunner
    from almanac.platform.timer.scheduler import across_tenants

    clock = SystemClock()
    now = clock.now()
    store = SqlStore(database, EveryRules())
    for slug in tenants:
        _jobs(database, slug, _script(database, slug, now), now, 20)
    timer = across_tenants(store, FunctionRunner(lambda source, event, caps: event["jobKey"]), clock,
                                 lambda: [], workers=4, renew_every_s=0.2)
    timer.start()
    try:
        deadline = time.monotonic() + 60
        while _index(database) and time.monotonic() < deadline:
            time.sleep(0.2)
    finally:
        timer.stop()
    assert _index(database) == {} and timer.outstanding() == (0, 0, 0)
    for slug in tenants:
        with database.tenant_session(slug) as s:
            ok = Counter(r.job_key for r in s.execute(select(Run).where(Run.status == "succeeded")).scalars())
            assert len(ok) == 20 and set(ok.values()) == {1}


def test_claims_of_tenants_whose_run_ids_coincide_are_all_renewed(
        database: Database, tenants: list[str], now: datetime) -> None:
    """Run ids are per tenant: every tenant's first run is run 1. Claims were held by run id
    alone, so one tenant's claim hid another's from renewal and its lease lapsed while it waited
    (seen as lease lapses with a single process in the bench)."""
    from almanac.platform.clock import ManualClock
    from almanac.platform.runner import FunctionRunner
    from almanac.platform.timer.scheduler import across_tenants

    class Holding(FunctionRunner):  # takes runs and never ends them (until told)
        def __init__(self) -> None:
            super().__init__(lambda *a: None)
            self.held: list[Any] = []

        def submit(self, source: str, event: dict, timeout_ms: int, memory_mb: int, effects: Any, done: Any) -> None:
            self.held.append(done)

    store = SqlStore(database, EveryRules())
    for slug in tenants:
        _jobs(database, slug, _script(database, slug, now), now, 3)
    timer = across_tenants(store, Holding(), ManualClock(now), lambda: [], workers=4,
                                 claimers=1, claim_ahead=4)  # room for 16, all of it for this one claimer
    timer._claim_pass(now)
    assert timer.outstanding().claimed == 9  # 3 tenants x runs 1, 2, 3
    later = now + timedelta(seconds=20)
    assert timer.renew_leases(later) == 0
    assert set(_index(database).values()) == {later + timedelta(seconds=31)}


def _commits(database: Database) -> list[int]:
    """A list that grows by one at every COMMIT on the engine (listener removed by nobody: per-test engine)."""
    from sqlalchemy import event

    seen: list[int] = []
    event.listen(database.engine, "commit", lambda conn: seen.append(1))
    return seen


def test_finished_runs_of_many_tenants_are_recorded_in_one_transaction(
        database: Database, tenants: list[str], now: datetime) -> None:
    """Before: a transaction per tenant (`finish_many`), the round trips of which dominated a burst."""
    store = SqlStore(database, EveryRules())
    for slug in tenants:
        _jobs(database, slug, _script(database, slug, now), now, 4)
    claims = store.due_index.claim_across(now, 100).claims
    done = RunResult("succeeded", output=1, duration_ms=1)
    commits = _commits(database)
    applied = store.due_index.finish_across([(c, done, now, now + timedelta(seconds=1)) for c in claims])
    assert applied == [True] * 12 and len(commits) == 1
    assert _index(database) == {}
    for slug in tenants:
        with database.tenant_session(slug) as s:
            assert {r.status for r in s.execute(select(Run)).scalars()} == {"succeeded"}


def test_one_fenced_attempt_rolls_the_cross_tenant_record_back_and_the_timer_records_the_rest(
        database: Database, tenants: list[str], now: datetime) -> None:
    from almanac.platform.clock import ManualClock
    from almanac.platform.runner import FunctionRunner
    from almanac.platform.timer.scheduler import across_tenants
    from almanac.platform.timer.recorder import Finished

    store, thief = SqlStore(database, EveryRules()), SqlStore(database, EveryRules())
    for slug in tenants:
        _jobs(database, slug, _script(database, slug, now), now, 2)
    claims = store.due_index.claim_across(now, 100).claims
    lost = claims[0]
    lapse = lost.lease_until + timedelta(seconds=1)
    for slug in tenants:  # only `lost`'s lease lapses; another process then takes it over
        others = Occurrence.__table__.c.id != (lost.occurrence_id if slug == lost.tenant else -1)
        with database.tenant_session(slug) as s:
            s.execute(Occurrence.__table__.update().where(others).values(
                lease_until=lapse + timedelta(minutes=5), due_at=lapse + timedelta(minutes=5)))
    assert [(c.tenant, c.occurrence_id) for c in thief.due_index.claim_across(lapse, 100).claims] == [
        (lost.tenant, lost.occurrence_id)]
    done = RunResult("succeeded", output=1, duration_ms=1)
    items = [(c, done, now, lapse) for c in claims]
    assert store.due_index.finish_across(items) is None  # rolled back: nothing recorded
    timer = across_tenants(store, FunctionRunner(lambda *a: None), ManualClock(lapse), lambda: [], workers=4)
    with timer._cond:
        timer._inflight = timer._unrecorded = len(claims)
        timer._held_by.update(Counter(c.tenant for c in claims))
    timer.recorder.record_done([Finished(c, done, now, lapse, 0.001) for c in claims])
    for slug in tenants:
        with database.tenant_session(slug) as s:
            ok = [r.occurrence_id for r in s.execute(select(Run).where(Run.status == "succeeded")).scalars()]
            assert len(ok) == (1 if slug == lost.tenant else 2)
    assert timer.outstanding() == (0, 0, 0)


def test_a_claim_across_tenants_costs_a_few_statements_per_tenant_and_no_savepoints(
        database: Database, tenants: list[str], now: datetime) -> None:
    """Before: a savepoint per tenant, the quotas read per tenant, and the runs' ids read back
    and written to their occurrences by two more statements (15 statements a tenant)."""
    from sqlalchemy import event

    store = SqlStore(database, EveryRules())
    for slug in tenants:
        _jobs(database, slug, _script(database, slug, now), now, 4)
    seen: list[str] = []
    event.listen(database.engine, "before_cursor_execute", lambda *a: seen.append(a[2].split()[0].upper()))
    batch = store.due_index.claim_across(now, 100)
    assert len(batch.claims) == 12 and all(c.run_id for c in batch.claims)
    assert "SAVEPOINT" not in seen
    # pick + quotas, then per tenant: occurrences, jobs, scripts (and their source, once a process),
    # today's use, runs, claim; then next due, backlog
    assert len(seen) <= 2 + 7 * len(tenants) + 2, seen
    for slug in tenants:  # each occurrence points at its run
        with database.tenant_session(slug) as s:
            linked = {(o.id, o.run_id) for o in s.execute(select(Occurrence)).scalars()}
            runs = {(r.occurrence_id, r.id) for r in s.execute(select(Run)).scalars()}
            assert linked == runs


def test_a_tenant_whose_part_fails_costs_only_its_own_rows(
        database: Database, tenants: list[str], now: datetime) -> None:
    store = SqlStore(database, EveryRules())
    for slug in tenants:
        _jobs(database, slug, _script(database, slug, now), now, 2)
    with database.engine.begin() as conn:  # a broken tenant: its part of the optimistic pass fails
        conn.execute(text("ALTER TABLE t_due_1.runs RENAME TO runs_hidden"))
    batch = store.due_index.claim_across(now, 100, tenant_exists=lambda slug: True)
    assert batch.failed == [tenants[1]]
    assert Counter(c.tenant for c in batch.claims) == {tenants[0]: 2, tenants[2]: 2}


def test_two_claimers_of_one_process_claim_at_once_each_its_part_and_every_run_once(
        database: Database, tenants: list[str]) -> None:
    """A pass mostly waits on the database; before, one thread claimed at a time in a process."""
    import threading

    from almanac.platform.clock import SystemClock
    from almanac.platform.runner import FunctionRunner
    from almanac.platform.timer.scheduler import across_tenants

    clock = SystemClock()
    now = clock.now()
    for slug in tenants:
        _jobs(database, slug, _script(database, slug, now), now, 20)
    both = threading.Barrier(2, timeout=30)
    limits: list[int] = []

    class Overlapping(DueIndex):  # the first two claims meet here: they are in flight together
        def claim_across(self, now: datetime, limit: int, **kw: Any) -> Any:
            if len(limits) < 2:
                limits.append(limit)
                both.wait()
            return super().claim_across(now, limit, **kw)

    timer = across_tenants(_indexed(SqlStore(database, EveryRules()), Overlapping), FunctionRunner(lambda *a: 1),
                           clock, lambda: [], workers=4, claimers=2)
    timer.start()
    try:
        deadline = time.monotonic() + 60
        while any(d <= clock.now() for d in _index(database).values()) and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        timer.stop()
    assert limits == [4, 4]  # each its half of the room (2 claims a thread before any run has ended)
    for slug in tenants:
        with database.tenant_session(slug) as s:
            ok = Counter(r.job_key for r in s.execute(select(Run).where(Run.status == "succeeded")).scalars())
            assert len(ok) == 20 and set(ok.values()) == {1}


def test_leases_are_renewed_every_renew_every_not_at_every_notification(
        database: Database, tenants: list[str]) -> None:
    """Before: the renewer woke on the timer's condition, notified at every run's end and pass,
    and renewed every held lease each time (a statement per tenant, many times a second)."""
    from almanac.platform.clock import SystemClock
    from almanac.platform.runner import FunctionRunner
    from almanac.platform.timer.scheduler import across_tenants

    calls: list[float] = []

    class Counting(DueIndex):
        def renew_across(self, claims: Any, now: datetime) -> set[tuple[str, int]]:
            calls.append(time.monotonic())
            return super().renew_across(claims, now)

    timer = across_tenants(_indexed(SqlStore(database, EveryRules()), Counting), FunctionRunner(lambda *a: 1),
                           SystemClock(), lambda: [], workers=2, renew_every_s=1.0)
    timer._claims[("x", 1)] = type("C", (), {"occurrence_id": 1, "tenant": "x", "run_id": 1, "lease_token": "t",
                                             "timeout_ms": 1000, "lease_until": datetime.now(timezone.utc),
                                             })()  # one held claim, its lease near its end: something to renew
    timer.start()
    try:
        started = time.monotonic()
        while time.monotonic() - started < 2.5:  # notified 100 times a second meanwhile
            with timer._cond:
                timer._cond.notify_all()
            time.sleep(0.01)
    finally:
        timer._claims.clear()
        timer.stop()
    assert 1 <= len(calls) <= 3, len(calls)


def test_only_leases_claimed_or_renewed_a_round_ago_are_renewed(
        database: Database, tenants: list[str], now: datetime) -> None:
    """Before: every held lease was renewed at every round, the runs of the last moment too, each
    row held in the renewal's transaction across tenants while the recorder waited to release it."""
    from almanac.platform.clock import ManualClock
    from almanac.platform.runner import FunctionRunner
    from almanac.platform.timer.scheduler import across_tenants

    renewed: list[int] = []

    class Counting(DueIndex):
        def renew_across(self, claims: Any, now: datetime) -> set[tuple[str, int]]:
            renewed.append(len(claims))
            return super().renew_across(claims, now)

    store = _indexed(SqlStore(database, EveryRules(), lease_margin_s=30), Counting)
    timer = across_tenants(store, FunctionRunner(lambda *a: 1), ManualClock(now), lambda: [], workers=2)
    for slug in tenants[:2]:
        _jobs(database, slug, _script(database, slug, now), now, 2)
    claims = store.due_index.claim_across(now, 10).claims
    timer._claims.update(((c.tenant, c.run_id), c) for c in claims)
    # A lease counts from its tenant's part of the pass (a few ms after `now`): rounds a second later.
    every, late = timer.renew_every, timedelta(seconds=1)
    assert timer.renew_leases(now + every / 2) == 0 and renewed == []  # claimed less than a round ago
    assert timer.renew_leases(now + every + late) == 0 and renewed == [4]
    assert timer.renew_leases(now + every * 1.5 + late) == 0 and renewed == [4]  # renewed less than a round ago
    assert timer.renew_leases(now + every * 2 + late) == 0 and renewed == [4, 4]
    with database.tenant_session(tenants[0]) as s:
        leases = {o.lease_until for o in s.execute(select(Occurrence)).scalars()}
    assert leases == {now + every * 2 + late + timedelta(seconds=1 + 30)}
    timer._claims.clear()


def test_a_lease_starts_when_its_tenant_is_claimed_not_when_a_slow_pass_began(
        database: Database, tenants: list[str], now: datetime, monkeypatch: pytest.MonkeyPatch) -> None:
    """A pass across many tenants on a busy database can take seconds. A lease counted from the
    pass's `now` was that much shorter once committed, and the claims of the last tenants lapsed
    (other processes took them as dead) before their runs began: each lease counts from the moment
    its own tenant's part of the pass ran."""
    store = SqlStore(database, EveryRules(), lease_margin_s=5)
    for slug in tenants[:2]:
        _jobs(database, slug, _script(database, slug, now), now, 1)
    slow = 1.0
    real = DueIndex._claim_tenant
    seen: list[str] = []

    def first_tenant_slow(self: Any, conn: Any, slug: str, *args: Any) -> Any:
        if not seen:
            time.sleep(slow)  # the database was slow for the first tenant of the pass
        seen.append(slug)
        return real(self, conn, slug, *args)

    monkeypatch.setattr(DueIndex, "_claim_tenant", first_tenant_slow)
    batch = store.due_index.claim_across(now, 10)
    leases = {c.tenant: c.lease_until for c in batch.claims}
    plain = now + timedelta(seconds=1 + 5)  # timeout 1 s + margin 5 s, counted from `now`
    assert leases[seen[0]] - plain < timedelta(seconds=slow / 2)
    assert leases[seen[1]] - plain >= timedelta(seconds=slow)


def test_the_pick_looks_wanted_rows_up_by_key_even_when_the_index_statistics_lag_behind_a_burst(
        database: Database, tenants: list[str], now: datetime) -> None:
    """Statistics taken while nothing was due say `due_at <= now` finds a row or so; then a burst falls
    due. A pick whose plan followed them compared every due row with every wanted one (a nested loop
    on the due_at index with a join filter: 474 ms a pass at 8,000 due); it must look each wanted row
    up by the primary key whatever the statistics say."""
    from almanac.platform.store.due_index import claim as store_due

    from almanac.platform.service import batch_writes as batch

    for slug in tenants:  # in bulk: 1,200 jobs one by one took most of this test's time
        sid = _script(database, slug, now)
        with database.tenant_session(slug) as s:
            batch.upsert_jobs(s, [dict(key=f"j{i}", script_id=sid, run_at=now + timedelta(days=1), payload=i,
                                       expire_after_s=None, max_attempts=2, priority=0) for i in range(400)], now)
    with database.engine.begin() as conn:
        conn.execute(text("ANALYZE due_index"))  # nothing due yet
        conn.execute(text("UPDATE due_index SET due_at = :now"), {"now": now})  # the burst
        plan = "\n".join(conn.execute(text("EXPLAIN " + store_due._PICK.text),
                                       store_due.pick_parameters(now, 40, 0.5, 171)).scalars())
    join = plan[plan.index("Nested Loop"):] if "Nested Loop" in plan else plan
    assert "pk_due_index" in join and "Join Filter" not in plan, plan
