"""history retention (SPEC section 9), on both databases.

Only old, finished history goes (runs, ended occurrences, delivered events with their deliveries);
what an unfinished run or an undelivered event still needs stays; pruning goes in batches and
resumes where it stopped; the period is per tenant (default from settings, operator override).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import func, select

from almanac import retention
from almanac.delivery.models import Delivery, DeliveryAttempt, EventFanout, Target
from almanac.platform.store.models import Event, Occurrence, Run

DAY = timedelta(days=1)


class History:
    """Rows written straight into a tenant's tables, at chosen times."""

    def __init__(self, db: Any, slug: str, now: datetime) -> None:
        self.db, self.slug, self.now = db, slug, now
        self.schedules = iter(range(1, 1_000_000))  # one schedule per run: (schedule, time) is unique
        with db.tenant_session(slug) as s:
            target = Target(kind="webhook", name="t", url="https://example.com/h", topics='["*"]', enabled=True,
                            created_at=now, updated_at=now)
            s.add(target)
            s.flush()
            self.target = target.id

    def run(self, age: timedelta, *, status: str = "succeeded", occurrence: str = "done") -> tuple[int, int]:
        when = self.now - age
        with self.db.tenant_session(self.slug) as s:
            schedule = next(self.schedules)
            occ = Occurrence(schedule_id=schedule, scheduled_for=when, due_at=None if occurrence == "done" else when,
                             priority=0, trigger="schedule", status=occurrence, attempt=1, created_at=when)
            s.add(occ)
            s.flush()
            run = Run(occurrence_id=occ.id, schedule_id=schedule, trigger="schedule", scheduled_for=when, created_at=when,
                      started_at=when, finished_at=None if status == "running" else when, status=status, attempt=1)
            s.add(run)
            s.flush()
            occ.run_id = run.id
            return run.id, occ.id

    def event(self, run_id: int, age: timedelta, delivery: str | None) -> int:
        """An event of the run; `delivery`: its delivery's status, or None for not yet fanned out."""
        when = self.now - age
        with self.db.tenant_session(self.slug) as s:
            ev = Event(run_id=run_id, topic="x", data="{}", created_at=when, attempts=0)
            s.add(ev)
            s.flush()
            if delivery is not None:
                s.add(EventFanout(event_id=ev.id, public_id=f"evt_{self.slug}_{ev.id}", fanned_out_at=when))
                d = Delivery(event_id=ev.id, target_id=self.target, order_key="schedule:1", status=delivery,
                             attempts=1, created_at=when, updated_at=when)
                s.add(d)
                s.flush()
                s.add(DeliveryAttempt(delivery_id=d.id, number=1, at=when, outcome="succeeded", latency_ms=1))
            return ev.id

    def ids(self, model: Any) -> set[int]:
        key = model.event_id if model is EventFanout else model.id
        with self.db.tenant_session(self.slug) as s:
            return set(s.execute(select(key)).scalars())

    def count(self, model: Any) -> int:
        with self.db.tenant_session(self.slug) as s:
            return s.execute(select(func.count()).select_from(model)).scalar_one()


def test_only_old_finished_history_goes(database: Any, make_tenant: Any, now: datetime) -> None:
    h = History(database, make_tenant(), now)
    old_run, old_occ = h.run(40 * DAY)
    delivered = h.event(old_run, 40 * DAY, "succeeded")
    running_run, running_occ = h.run(40 * DAY, status="running", occurrence="running")
    retried_run, retried_occ = h.run(40 * DAY, status="failed", occurrence="planned")  # its next attempt waits
    undelivered_run, undelivered_occ = h.run(40 * DAY)
    failing = h.event(undelivered_run, 40 * DAY, "failed")  # will be retried: an open delivery
    unfanned_run, unfanned_occ = h.run(40 * DAY)
    unfanned = h.event(unfanned_run, 40 * DAY, None)  # the dispatcher has not seen it yet
    young_run, young_occ = h.run(5 * DAY)
    young_event = h.event(young_run, 5 * DAY, "succeeded")

    report = retention.prune(database, [h.slug], 30, now)[h.slug]

    assert h.ids(Run) == {running_run, undelivered_run, unfanned_run, young_run}
    assert h.ids(Occurrence) == {running_occ, retried_occ, undelivered_occ, unfanned_occ, young_occ}
    assert h.ids(Event) == {failing, unfanned, young_event}
    assert delivered not in h.ids(EventFanout) and h.count(Delivery) == 2 and h.count(DeliveryAttempt) == 2
    assert (report.runs, report.occurrences, report.events, report.deliveries) == (2, 1, 1, 1)
    assert report.done
    # Once the delivery succeeds, the event, then its run, then its occurrence go on the next pass.
    with database.tenant_session(h.slug) as s:
        s.query(Delivery).filter(Delivery.event_id == failing).update({"status": "succeeded"})
    retention.prune(database, [h.slug], 30, now)
    assert undelivered_run not in h.ids(Run) and undelivered_occ not in h.ids(Occurrence)
    assert failing not in h.ids(Event)


def test_pruning_goes_in_batches_and_resumes(database: Any, make_tenant: Any, now: datetime) -> None:
    h = History(database, make_tenant(), now)
    for _ in range(25):
        run_id, _ = h.run(40 * DAY)
        h.event(run_id, 40 * DAY, "dead")
    first = retention.prune_tenant(database, h.slug, now - 30 * DAY, batch=10, max_batches=2)
    assert (first.events, first.batches, first.done) == (20, 2, False)
    assert h.count(Run) == 25
    rest = retention.prune_tenant(database, h.slug, now - 30 * DAY, batch=10)
    assert (rest.events, rest.runs, rest.occurrences, rest.done) == (5, 25, 25, True)
    assert rest.batches == 1 + 3 + 3  # each step in batches of at most 10
    assert h.count(Run) == h.count(Occurrence) == h.count(Event) == h.count(Delivery) == 0


def test_the_period_is_per_tenant(database: Any, make_tenant: Any, now: datetime) -> None:
    short, default = History(database, make_tenant(), now), History(database, make_tenant(), now)
    for h in (short, default):
        h.run(5 * DAY)
        h.run(40 * DAY)
    with database.shared_session() as s:
        retention.set_retention_days(s, short.slug, 3, now)
        assert retention.retention_days(s, short.slug, 30) == 3
        assert retention.retention_days(s, default.slug, 30) == 30
    retention.prune(database, [short.slug, default.slug], 30, now)
    assert (short.count(Run), default.count(Run)) == (0, 1)
    with database.shared_session() as s:
        retention.set_retention_days(s, short.slug, None, now)
        assert retention.retention_days(s, short.slug, 30) == 30


def test_the_server_prunes_the_tenants_it_looks_after(services: Any, make_tenant: Any, now: datetime) -> None:
    h = History(services.db, make_tenant(), now)
    h.run(40 * DAY)
    pruner = services.extras["pruner"]
    assert pruner.default_days == 30 and pruner.batch == services.settings.prune_batch
    assert pruner.tenant_slugs == services.extras["leases"].owned  # the timer's share of the tenants
    pruner.tenant_slugs = lambda: [h.slug]  # (the leases are not started in this test)
    report = pruner.run_once()
    assert report[h.slug].runs == 1 and h.count(Run) == 0


def test_a_prune_transaction_holding_its_locks_does_not_hold_up_a_claim(database: Any, make_tenant: Any,
                                                                        now: datetime) -> None:
    """Pruning never blocks claiming: with a prune batch's rows deleted and its transaction still open,
    the timer's claim of due work in the same tenant answers (PostgreSQL's row locks; SQLite has one
    writer, and a batch holds it for milliseconds)."""
    from concurrent.futures import ThreadPoolExecutor

    from almanac.platform.service import batch_writes as batch
    from almanac.platform.store.models import Script, ScriptVersion
    from almanac.platform.store.sql_store import SqlStore

    if database.is_sqlite:
        pytest.skip("SQLite has one writer at a time")
    h = History(database, make_tenant(), now)
    for _ in range(5):
        run_id, _ = h.run(40 * DAY)
        h.event(run_id, 40 * DAY, "succeeded")
    with database.tenant_session(h.slug) as s:
        script = Script(name="noop", current_version=1, timeout_ms=1000, memory_mb=32, created_at=now, updated_at=now)
        s.add(script)
        s.flush()
        s.add(ScriptVersion(script_id=script.id, version=1, source="export default () => 1;", created_at=now))
        batch.upsert_jobs(s, [dict(key=f"due-{i}", script_id=script.id, run_at=now - timedelta(minutes=1),
                                   payload=None, expire_after_s=None, max_attempts=3, priority=0) for i in range(3)],
                          now)
    store = SqlStore(database, lease_margin_s=600)
    cutoff = now - 30 * DAY
    with ThreadPoolExecutor(1) as pool, database.tenant_session(h.slug) as pruning:
        # One batch of each step, deleted and not committed: the rows stay locked by this transaction.
        retention._drop_events(pruning, retention._old_events(pruning, cutoff, 500))
        retention._drop_ids(Run)(pruning, retention._old_runs(pruning, cutoff, 500))
        retention._drop_ids(Occurrence)(pruning, retention._old_occurrences(pruning, cutoff, 500))
        claimed = pool.submit(store.claim_due, h.slug, now, 10).result(timeout=30)
        assert len(claimed.claims) == 3
    assert h.count(Run) == 3 and h.count(Event) == 0  # the prune committed after the claim
