"""Scale-out on a real PostgreSQL: several `almanac worker` processes, faults injected under load.

The module starts its own PostgreSQL server (so that it may restart it), migrates
a fresh database per test with `almanac migrate`, makes its tenants in this process,
creates the jobs in bulk through the planning layer, and runs real `almanac
worker` processes (real sandboxed scripts). What every test checks at the end:
each occurrence succeeded exactly once, nothing is left planned or running, and
every other run row is an attempt whose lease lapsed.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select, text
from sqlalchemy.orm import Session

from almanac.db import TENANT_SCHEMA, Database, schema_for
from almanac.platform.store import planning
from almanac.platform.store.models import DONE, Job, Occurrence, Run, Script, ScriptVersion
from almanac.settings import Settings
from almanac.tenants import auth, registry
from almanac.tenants.models import Tenant
from tests.support.pg import PgServer, find_bin
from tests.support.proc import ALMANAC, almanac, cli_env
from tests.support.sandbox_cache import with_shared_cache

pytestmark = [pytest.mark.postgres, pytest.mark.slow, pytest.mark.timing]

NOOP = "export default function (event) { return event.jobKey; }"
# About 20 ms of work a run: every worker then has runs in flight whenever it owns a tenant with
# work left, so a kill -9 always catches some (with NOOP runs a kill could fall between batches).
WORK = "export default async function () { const t = Date.now(); while (Date.now() - t < 20) {} return 1; }"
# 200 ms of work a run: on one sandbox process a worker ends about 5 a second.
STEADY = "export default function () { const t = Date.now(); while (Date.now() - t < 200) {} return 1; }"
BUSY = "export default function () { const t = Date.now(); while (Date.now() - t < 1500) {} return 'done'; }"


def _clone_tenants(settings: Settings, source: str, slugs: list[str]) -> None:
    """Tenants like `source` (made by `tenant create`), made in seconds rather than minutes.

    `tenant create` runs every tenant migration and hashes an admin's password: ~1 s a tenant
    on a busy 2-core box, most of a 200-tenant test. Here `source`'s schema (tables, indexes,
    the due index triggers; alembic's revision row) is dumped once by pg_dump, renamed, and
    loaded for all of them in one psql call, and each gets its registry row. The workers see
    tenants no different from the ones the CLI makes; no admin is needed by a worker.
    """
    url = settings.database_url.replace("postgresql+psycopg", "postgresql")
    schema = schema_for(source)
    dump = subprocess.run([find_bin("pg_dump"), "--schema-only", "--no-owner", "-n", schema, url],
                          check=True, capture_output=True, text=True).stdout
    lines = [line for line in dump.splitlines() if not line.startswith("\\")]  # psql meta-commands (\restrict)
    db = Database(settings)
    try:
        with db.engine.connect() as conn:
            revision = conn.execute(text(f"SELECT version_num FROM {schema}.alembic_version")).scalar_one()
        script = "\n".join(
            re.sub(rf"\b{schema}\b", schema_for(slug), "\n".join(lines))
            + f"\nINSERT INTO {schema_for(slug)}.alembic_version VALUES ('{revision}');" for slug in slugs)
        loaded = subprocess.run([find_bin("psql"), "-q", "-v", "ON_ERROR_STOP=1", "-d", url], input=script,
                                capture_output=True, text=True)
        assert loaded.returncode == 0, loaded.stderr[-2000:]
        now = datetime.now(timezone.utc)
        with db.shared_session() as s:
            s.add_all(Tenant(slug=slug, name=slug, min_interval_seconds=1, created_at=now) for slug in slugs)
    finally:
        db.dispose()


def _script_and_jobs(s: Session, slug: str, source: str, times: list[datetime], timeout_ms: int,
                     now: datetime) -> None:
    """A script of `source`, and a job of it at each of `times` (`<slug>-<i>`), in the session's tenant."""
    script = Script(name="s", current_version=1, timeout_ms=timeout_ms, memory_mb=32, created_at=now, updated_at=now)
    s.add(script)
    s.flush()
    s.add(ScriptVersion(script_id=script.id, version=1, source=source, created_at=now))
    for i, when in enumerate(times):
        fields = dict(script_id=script.id, run_at=when, payload="null", expire_after_s=None, max_attempts=3,
                      priority=0)
        planning.upsert_job(s, f"{slug}-{i}", fields, now=now)


class RestartablePg(PgServer):
    """The tests' PgServer, plus a restart on the same port and data (a crash, then recovery)."""

    def restart(self, down_s: float) -> None:
        assert self.tmp is not None
        data = str(Path(self.tmp) / "data")
        self._run(find_bin("pg_ctl"), "-D", data, "-m", "immediate", "-w", "stop")
        time.sleep(down_s)
        options = (
            f"-p {self.port} -k {self.tmp} -c listen_addresses=127.0.0.1 -c fsync=off "
            "-c synchronous_commit=off -c full_page_writes=off -c max_connections=300"
        )
        self._run(find_bin("pg_ctl"), "-D", data, "-o", options, "-l", str(Path(self.tmp) / "log"), "-w", "start")


@pytest.fixture(scope="module")
def pg() -> Iterator[RestartablePg]:
    server = RestartablePg()
    if os.environ.get("ALMANAC_TEST_PG_URL") or not server.available:
        pytest.skip("needs PostgreSQL server binaries to start (and restart) a server of its own")
    server.start()
    yield server
    server.stop()


class Cluster:
    """A fresh database, its tenants, and the worker processes started on it."""

    def __init__(self, pg: RestartablePg, var: Path, tenants: int, *, clone_later: bool = False, **env: str) -> None:
        var.mkdir(parents=True, exist_ok=True)
        url = pg.url_for(pg.create_database())
        self.settings = Settings(database_url=url, var_dir=var, secret_key="scaleout-secret-key-0123456789")
        self.env = cli_env(self.settings, **{"ALMANAC_LEASE_MARGIN_S": "2", "ALMANAC_TIMER_LEASE_S": "3", **env})
        assert almanac("migrate", env=self.env).returncode == 0
        self.tenants = [f"t{i}" for i in range(tenants)]
        self.db = Database(self.settings)
        by_registry = self.tenants if tenants <= 3 else self.tenants[:1]
        for slug in by_registry:  # `almanac tenant create` has its own tests; a process each cost ~1 s here
            registry.create_tenant(self.db, slug, admin_email=f"a@{slug}.test", admin_password=None, name=slug,
                                   min_interval_seconds=1, now=datetime.now(timezone.utc))
        self.clones = self.tenants[len(by_registry):]  # many: copies of the first (see `_clone_tenants`)
        if not clone_later:
            self.make_clones()
        self.var = var
        self.workers: list[subprocess.Popen] = []

    def add_jobs(self, slug: str, source: str, times: list[datetime], timeout_ms: int = 2000) -> None:
        with self.db.tenant_session(slug) as s:
            _script_and_jobs(s, slug, source, times, timeout_ms, datetime.now(timezone.utc))

    def make_clones(self) -> None:
        """The tenants beyond the first (`clone_later`: while the workers start, say)."""
        if self.clones:
            _clone_tenants(self.settings, self.tenants[0], self.clones)
            self.clones = []

    def add_jobs_across(self, source: str, times: list[datetime]) -> None:
        """`add_jobs` in every tenant, in one transaction (a transaction per tenant took seconds for 200)."""
        now = datetime.now(timezone.utc)
        with self.db.engine.connect() as conn, conn.begin():
            for slug in self.tenants:
                tenant_conn = conn.execution_options(schema_translate_map={TENANT_SCHEMA: schema_for(slug)})
                with Session(bind=tenant_conn, join_transaction_mode="rollback_only") as s:
                    s.info["tenant"] = slug
                    _script_and_jobs(s, slug, source, times, 2000, now)
                    s.flush()

    def move_all_jobs(self, when: datetime) -> datetime:
        """Every tenant's jobs (and their occurrences) due at `when`, in one short transaction; `when`."""
        with self.db.engine.connect() as conn, conn.begin():
            for slug in self.tenants:
                schema = schema_for(slug)
                conn.execute(text(f"UPDATE {schema}.jobs SET run_at = :when"), {"when": when})
                conn.execute(text(f"UPDATE {schema}.occurrences SET scheduled_for = :when, due_at = :when"),
                             {"when": when})
        return when

    def start_worker(self, *, ready_line: bool = False) -> subprocess.Popen:
        """`almanac worker`; with `ready_line` it logs at info, so that `wait_ready` can see its sandbox pool up."""
        log = (self.var / f"worker-{len(self.workers)}.log").open("w")
        env = {**self.env, "ALMANAC_LOG_LEVEL": "info"} if ready_line else self.env
        proc = subprocess.Popen([ALMANAC, "worker"], env=env, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)
        self.workers.append(proc)
        return proc

    def wait_ready(self, timeout: float) -> None:
        """Every worker's sandbox pool is up (started with `ready_line`)."""
        deadline = time.monotonic() + timeout
        while not all("worker.sandbox_pool_ready" in self.log(i) for i in range(len(self.workers))):
            assert time.monotonic() < deadline, "workers not ready:\n" + "\n".join(
                self.log(i)[-1500:] for i in range(len(self.workers)))
            time.sleep(0.2)

    def kill_a_claim_holder(self) -> subprocess.Popen:
        """kill -9 the worker that holds the most running attempts; that worker.

        With the due index no tenant belongs to a worker, and a live worker may hold no claim
        at a given moment (it failed the kill test once in six CI runs to kill the first one).
        So every worker is stopped (SIGSTOP) while the running attempts are counted by the
        process named in their lease token, and none can finish a claim between the look
        and the kill.
        """
        live = [w for w in self.workers if w.poll() is None]
        for w in live:
            os.kill(w.pid, signal.SIGSTOP)
        killed = None
        try:
            held = Counter(self.running_tags())
            tags = self.tags()
            chosen = max(live, key=lambda w: held[tags.get(w.pid, "")])
            assert held[tags.get(chosen.pid, "")] > 0, f"no worker held a running attempt: {held}"
            os.kill(chosen.pid, signal.SIGKILL)
            chosen.wait()
            killed = chosen
        finally:
            for w in live:
                if w is not killed:
                    os.kill(w.pid, signal.SIGCONT)
        return chosen

    def tags(self) -> dict[int, str]:
        """Each live worker's tag (the first 8 characters of its lease tokens), by pid, from its heartbeat row."""
        with self.db.engine.connect() as conn:
            owners = conn.execute(text("SELECT owner FROM worker_heartbeats")).scalars().all()
        return {int(owner.split(":")[-2]): owner[-8:] for owner in owners}

    def running_tags(self) -> list[str]:
        """The tag of every running attempt, in every tenant."""
        parts = " UNION ALL ".join(f"SELECT left(lease_token, 8) AS tag FROM {schema_for(slug)}.runs "
                                   "WHERE status = 'running'" for slug in self.tenants)
        with self.db.engine.connect() as conn:
            return list(conn.execute(text(parts)).scalars())

    def log(self, index: int) -> str:
        return (self.var / f"worker-{index}.log").read_text()

    def runs(self, slug: str) -> list[Any]:
        with self.db.tenant_session(slug) as s:
            return s.execute(select(Run.occurrence_id, Run.job_key, Run.attempt, Run.status, Run.reason,
                                    Run.scheduled_for, Run.started_at)).all()

    def succeeded(self) -> int:
        """Runs that succeeded in every tenant, in one statement (polled often; 200 tenants are 200 schemas)."""
        parts = " UNION ALL ".join(f"SELECT count(*) AS n FROM {schema_for(slug)}.runs WHERE status = 'succeeded'"
                                   for slug in self.tenants)
        with self.db.engine.connect() as conn:
            return int(conn.execute(text(f"SELECT sum(n) FROM ({parts}) c")).scalar() or 0)

    def wait_succeeded(self, count: int, timeout: float) -> float:
        started = deadline = time.monotonic()
        deadline += timeout
        done = 0
        while time.monotonic() < deadline:
            try:
                done = self.succeeded()
            except Exception:  # the database is restarting
                self.db.dispose()
                done = -1
            if done >= count:
                return time.monotonic() - started
            time.sleep(0.3)
        raise AssertionError(f"{done} of {count} runs succeeded; worker logs:\n"
                             + "\n".join(self.log(i)[-1500:] for i in range(len(self.workers))))

    def assert_exactly_once(self, jobs_per_tenant: int) -> Counter:
        """Every job succeeded once; everything else is an attempt whose lease lapsed. Returns statuses."""
        statuses: Counter = Counter()
        for slug in self.tenants:
            runs = self.runs(slug)
            statuses.update(r.status for r in runs)
            succeeded = Counter(r.job_key for r in runs if r.status == "succeeded")
            assert len(succeeded) == jobs_per_tenant and set(succeeded.values()) == {1}, slug
            per_occurrence = Counter(r.occurrence_id for r in runs if r.status == "succeeded")
            assert set(per_occurrence.values()) == {1}
            others = [r for r in runs if r.status != "succeeded"]
            assert all(r.status == "failed" and "lease lapsed" in r.reason for r in others), others[:5]
            with self.db.tenant_session(slug) as s:
                assert s.execute(select(func.count()).select_from(Occurrence)
                                 .where(Occurrence.status != DONE)).scalar_one() == 0
                assert set(s.execute(select(Job.state)).scalars()) == {"done"}
        return statuses

    def close(self) -> None:
        for proc in self.workers:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGCONT)
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in self.workers:
            try:
                # A worker stops in 1-5 s here; a stop signal that landed on another thread than the main
                # one used to be lost (tests/acceptance/test_worker_stop.py). No test here is about a clean stop.
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        for proc in self.workers:  # sandbox children of a killed worker are in its session
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.db.dispose()


@pytest.fixture
def cluster(pg: RestartablePg, tmp_path: Path, sandbox_image_cache: Path) -> Iterator[Any]:
    made: list[Cluster] = []

    def make(tenants: int, clone_later: bool = False, **env: str) -> Cluster:
        # The workers load the run's compiled sandbox image instead of each compiling its own.
        made.append(Cluster(pg, with_shared_cache(tmp_path / "var", sandbox_image_cache), tenants,
                            clone_later=clone_later, **env))
        return made[-1]

    yield make
    for c in made:
        c.close()


def test_three_workers_and_a_kill_9_mid_run_every_occurrence_succeeds_exactly_once(cluster: Any) -> None:
    tenants, per_tenant = 4, 300
    c = cluster(tenants)
    due = datetime.now(timezone.utc) + timedelta(seconds=4)
    for slug in c.tenants:
        c.add_jobs(slug, WORK, [due] * per_tenant)  # 1,200 occurrences due in the same second
    for _ in range(3):
        c.start_worker(ready_line=True)
    c.wait_ready(timeout=60)
    c.wait_succeeded(tenants * per_tenant // 10, timeout=60)
    victim = c.kill_a_claim_holder()  # kill -9 in the middle of the burst
    assert c.succeeded() < tenants * per_tenant, "the burst was over before the kill: make it bigger"
    c.wait_succeeded(tenants * per_tenant, timeout=90)
    statuses = c.assert_exactly_once(per_tenant)
    assert statuses["failed"] >= 1, "the killed worker held no claim: the kill proved nothing"
    assert all(w.poll() is None for w in c.workers if w is not victim)


def test_in_a_burst_on_two_workers_every_tenant_s_median_start_lag_is_close_to_every_other_s(cluster: Any) -> None:
    """Fair shares across processes (SPEC section 11): the tenants' timer leases are spread over the
    two workers, and which one holds a tenant must not decide how long its runs wait."""
    tenants, per_tenant = 6, 80
    c = cluster(tenants)
    for _ in range(2):
        c.start_worker(ready_line=True)
    c.wait_ready(timeout=60)
    due = datetime.now(timezone.utc) + timedelta(seconds=3)
    for slug in c.tenants:
        c.add_jobs(slug, WORK, [due] * per_tenant)  # 480 occurrences due in the same second
    c.wait_succeeded(tenants * per_tenant, timeout=120)
    medians = {}
    for slug in c.tenants:
        lags = sorted((r.started_at - r.scheduled_for).total_seconds() for r in c.runs(slug) if r.status == "succeeded")
        medians[slug] = lags[len(lags) // 2]
    with c.db.engine.connect() as conn:
        holders = set(conn.execute(text("SELECT owner FROM timer_leases")).scalars())
    spread = max(medians.values()) - min(medians.values())
    print(f"\ntenants' median start lags {sorted(round(m, 2) for m in medians.values())}, spread {spread:.2f} s, "
          f"{len(holders)} lease holders; load {os.getloadavg()[0]:.1f}")
    assert spread < 3.0, medians  # the promise is 2 s; a loaded CI box's scheduling adds to it


def test_200_tenants_a_burst_across_all_of_them_and_a_kill_9_nothing_lost_or_doubled(cluster: Any) -> None:
    """The cross-tenant due index: no tenant belongs to the killed process, so its due work is
    taken by the others at their next pass; only the runs it had claimed wait for their leases
    (a 2 s script timeout + 2 s margin here). Prints the per-tenant start lag spread."""
    tenants, per_tenant = 200, 3
    started = time.monotonic()
    c = cluster(tenants, clone_later=True)
    for _ in range(3):
        c.start_worker(ready_line=True)
    c.make_clones()  # while the workers start: they need no tenant list to claim from the due index
    made = time.monotonic()
    c.wait_ready(timeout=120)  # the burst's lag is then the scheduler's, not the workers' start-up
    ready = time.monotonic()
    later = datetime.now(timezone.utc) + timedelta(hours=1)
    c.add_jobs_across(WORK, [later] * per_tenant)  # 600 occurrences over 200 tenants
    c.move_all_jobs(datetime.now(timezone.utc) + timedelta(seconds=2))  # due in the same second
    c.wait_succeeded(tenants * per_tenant // 10, timeout=90)
    victim = c.kill_a_claim_holder()
    killed = datetime.now(timezone.utc)
    assert c.succeeded() < tenants * per_tenant, "the burst was over before the kill: make it bigger"
    c.wait_succeeded(tenants * per_tenant, timeout=120)
    statuses = c.assert_exactly_once(per_tenant)
    assert all(w.poll() is None for w in c.workers if w is not victim)
    lags: dict[str, list[float]] = {}
    after_kill: list[datetime] = []
    for slug in c.tenants:
        for r in c.runs(slug):
            if r.status == "succeeded":
                lags.setdefault(slug, []).append((r.started_at - r.scheduled_for).total_seconds())
                if r.started_at >= killed:
                    after_kill.append(r.started_at)
    worst = sorted(max(v) for v in lags.values())
    medians = sorted(sorted(v)[len(v) // 2] for v in lags.values())
    first_after = (min(after_kill) - killed).total_seconds()
    print(f"\nset-up {made - started:.1f} s, workers ready {ready - made:.1f} s after; "
          f"200 tenants x {per_tenant}: lease lapses {statuses['failed']}; per-tenant median lag "
          f"{medians[0]:.2f}-{medians[-1]:.2f} s, worst lag per tenant {worst[0]:.2f}-{worst[-1]:.2f} s; "
          f"first start after the kill {first_after:.2f} s; load {os.getloadavg()[0]:.1f}")
    # The others went on with the due work before any lease of the dead one could lapse (4 s).
    assert first_after < 4, first_after


SLOW = "export default function () { const t = Date.now(); while (Date.now() - t < 1200) {} return 'slow'; }"


def test_a_killed_worker_s_running_attempts_start_again_on_another_worker_within_seconds(cluster: Any) -> None:
    """kill -9 takes the worker's session with it: the others see its liveness lock gone and retry its
    running attempts at once, long before their leases (10 s timeout + 60 s margin here) could lapse."""
    c = cluster(2, ALMANAC_LEASE_MARGIN_S="60", ALMANAC_SANDBOX_PROCESSES="1")
    for _ in range(2):
        c.start_worker(ready_line=True)
    c.wait_ready(timeout=60)
    due = datetime.now(timezone.utc) + timedelta(seconds=1)
    for slug in c.tenants:
        c.add_jobs(slug, SLOW, [due] * 4, timeout_ms=10_000)
    deadline = time.monotonic() + 30
    while len(set(c.running_tags())) < 2:  # both workers run one
        assert time.monotonic() < deadline, [c.log(i)[-1500:] for i in range(2)]
        time.sleep(0.05)
    victim = c.kill_a_claim_holder()
    killed = datetime.now(timezone.utc)
    c.wait_succeeded(8, timeout=40)
    statuses = c.assert_exactly_once(4)
    assert statuses["failed"] >= 1, "the killed worker held no running attempt"
    retried = {(slug, r.occurrence_id) for slug in c.tenants for r in c.runs(slug) if r.status == "failed"}
    starts = [(r.started_at - killed).total_seconds() for slug in c.tenants for r in c.runs(slug)
              if (slug, r.occurrence_id) in retried and r.status == "succeeded"]
    print(f"\nthe killed worker's {len(starts)} running attempts started again {min(starts):.2f}-{max(starts):.2f} s "
          f"after the kill; load {os.getloadavg()[0]:.1f}")
    # Detection takes about a second (a beat and its grace), then a pass; the runs ahead take 1.2 s each.
    assert max(starts) < 5, starts
    assert all(w.poll() is None for w in c.workers if w is not victim)


def test_in_a_burst_a_killed_worker_s_runs_start_again_within_2_s_ahead_of_the_survivors_backlog(
        cluster: Any) -> None:
    """Its runs in flight (claimed, running or held) start again on the others within about 2 s at the median,
    though both survivors are busy with a backlog: the others see its session end, are woken, claim them past
    their room and start them before what they hold (SPEC section 11). The leases (60 s margin) play no part."""
    c = cluster(6, ALMANAC_LEASE_MARGIN_S="60", ALMANAC_SANDBOX_PROCESSES="1")
    for _ in range(3):
        c.start_worker(ready_line=True)
    c.wait_ready(timeout=90)
    per_tenant = 30
    due = datetime.now(timezone.utc) + timedelta(seconds=1)
    for slug in c.tenants:
        c.add_jobs(slug, STEADY, [due] * per_tenant, timeout_ms=10_000)
    c.wait_succeeded(30, timeout=60)  # the workers have measured their pace: they hold what they run
    victim = c.kill_a_claim_holder()
    killed = datetime.now(timezone.utc)
    assert c.succeeded() < len(c.tenants) * per_tenant - 40, "the backlog was gone before the kill: make it bigger"
    c.wait_succeeded(len(c.tenants) * per_tenant, timeout=180)
    statuses = c.assert_exactly_once(per_tenant)
    assert statuses["failed"] >= 1, "the killed worker held no claim"
    retried = {(slug, r.occurrence_id) for slug in c.tenants for r in c.runs(slug) if r.status == "failed"}
    starts = sorted((r.started_at - killed).total_seconds() for slug in c.tenants for r in c.runs(slug)
                    if (slug, r.occurrence_id) in retried and r.status == "succeeded")
    print(f"\nthe killed worker's {len(starts)} runs in flight started again {starts[0]:.2f}-{starts[-1]:.2f} s "
          f"after the kill, median {starts[len(starts) // 2]:.2f} s; load {os.getloadavg()[0]:.1f}")
    assert starts[len(starts) // 2] < 3.0, starts  # the promise is 2 s; a loaded CI box adds to it
    assert all(w.poll() is None for w in c.workers if w is not victim)


def test_the_database_restarted_under_load_workers_reconnect_and_carry_on(cluster: Any, pg: RestartablePg) -> None:
    tenants, per_tenant = 3, 200
    c = cluster(tenants)
    start = datetime.now(timezone.utc) + timedelta(seconds=3)
    for slug in c.tenants:  # 600 occurrences spread over 8 s: some before, some during, some after the outage
        c.add_jobs(slug, NOOP, [start + timedelta(seconds=8 * i / per_tenant) for i in range(per_tenant)])
    for _ in range(3):
        c.start_worker()
    c.wait_succeeded(60, timeout=60)
    pg.restart(down_s=3)
    c.db.dispose()
    c.wait_succeeded(tenants * per_tenant, timeout=90)
    c.assert_exactly_once(per_tenant)
    assert all(w.poll() is None for w in c.workers), "a worker died with the database"


def test_a_worker_paused_past_its_lease_cannot_finish_the_run_another_took_over(cluster: Any) -> None:
    c = cluster(1, ALMANAC_LEASE_MARGIN_S="6")  # room for a cold sandbox on a busy machine: no third attempt
    (slug,) = c.tenants
    c.add_jobs(slug, BUSY, [datetime.now(timezone.utc)], timeout_ms=2500)  # lease: 2.5 s + 6 s margin
    paused = c.start_worker()
    deadline = time.monotonic() + 30
    while not [r for r in c.runs(slug) if r.status == "running"]:
        assert time.monotonic() < deadline, c.log(0)
        time.sleep(0.1)
    os.kill(paused.pid, signal.SIGSTOP)  # its sandbox child finishes the script; the worker cannot record it
    try:
        c.start_worker()
        c.wait_succeeded(1, timeout=40)  # the other worker saw the lease lapse and ran attempt 2
    finally:
        os.kill(paused.pid, signal.SIGCONT)
    deadline = time.monotonic() + 20
    # Resumed, the worker records attempt 1 and is refused. (Its sandbox child may have waited all
    # along for the script's source: that wait is not the run's, so the child is not killed as hung.)
    while '"run.fenced"' not in c.log(0):
        assert time.monotonic() < deadline, c.log(0)[-3000:]
        time.sleep(0.2)
    runs = sorted(c.runs(slug), key=lambda r: r.attempt)
    assert [(r.attempt, r.status) for r in runs] == [(1, "failed"), (2, "succeeded")]
    assert "lease lapsed" in runs[0].reason
    c.assert_exactly_once(1)
    assert paused.poll() is None


def test_a_job_created_through_the_api_of_one_process_wakes_the_worker_that_owns_the_tenant(cluster: Any) -> None:
    """The worker would otherwise look again only after its idle poll (5 s): NOTIFY makes it at once."""
    from tests.support.proc import Server

    c = cluster(1)
    (slug,) = c.tenants
    c.start_worker()
    with c.db.shared_session() as session:
        token = auth.create_token(session, registry.get_tenant(session, slug), "t", "admin",
                                  now=datetime.now(timezone.utc))[1]
    api = Server(c.env, "--no-scheduler").wait_ready()
    try:
        client = api.client(token)
        script = client.post("/api/v1/scripts", json={"name": "noop", "source": NOOP}).json()["id"]
        time.sleep(6)  # the worker has looked at the tenant and is now sleeping its idle poll
        lags = []
        for i in range(3):
            sent = datetime.now(timezone.utc)
            answer = client.put(f"/api/v1/jobs/now-{i}", json={"script_id": script, "run_at": sent.isoformat()})
            assert answer.status_code == 201, answer.text
            c.wait_succeeded(i + 1, timeout=10)
            run = client.get(f"/api/v1/runs?job_key=now-{i}").json()["items"][0]
            started = datetime.fromisoformat(run["started_at"].replace("Z", "+00:00"))
            lags.append((started - sent).total_seconds())
            time.sleep(1.3)  # a different moment of the worker's poll each time
        assert max(lags) < 1.0, lags
    finally:
        api.stop()
