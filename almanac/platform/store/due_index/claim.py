"""The cross-tenant claim of `SqlStore` (PostgreSQL): due work of every tenant found with one indexed query.

`due_index` (shared schema) mirrors each tenant's `occurrences.due_at`, kept by a trigger
in the transaction that writes the occurrence (migrations s0007 / t0014). One claim
transaction, on one connection:

1. picks up to `limit` due rows of the index, fairly between tenants, and locks them
   `FOR UPDATE SKIP LOCKED` (other processes take other rows at the same moment);
2. for each tenant among them, inside a savepoint and with the connection's `tenant`
   schema mapped to that tenant's schema, reads and locks those occurrences and runs
   the same per-row decisions and bulk claim as `claim_due` (`TenantClaims.claim_rows`);
   the triggers move the claimed rows' `due_at` to their lease end in the index;
3. when it did not fill `limit`, says when the earliest row of the index falls due.

With lanes (`connection_lanes`, the default on PostgreSQL) a pass is one such transaction per lane it
visits, each on its lane's connection and picking only that lane's tenants (and a dead process's
runs of any lane): a tenant is tied to one connection of each process, for warm caches, never to a
process. Which lane a pass starts at is the one this process served least per tenant it has due
(`Lanes.rotation`), so that a lane of few tenants gets no more a tenant than a lane of many.

No tenant is visited unless it has due work, so idle tenants cost nothing per pass, and
nothing ties a tenant to a process: when a process dies, its due work is claimed by the
others at their next pass; its running attempts come back once it is seen dead
(`liveness`: made due a day early, they come before every round of the pick), or through the
index when their leases lapse (their `due_at` is the lease end), the last resort.

Affinity (`prefer`), an option the timer does not use: within each round of the round robin
below, a pass may order the due rows of some tenants (a process's timer leases) before the
others'. It kept a tenant's tables warm in its holder's backends, but it decided who waits: in a
burst each process served its own tenants first in every round, so the tenants of a busy process,
or of one that died (its leases move only when they lapse), came last in every round (decision
0172). Every process now claims in the round robin's one order, by the tenants' turns (below);
the lanes keep each tenant on one connection of each process.

Fairness between tenants (SPEC section 11): the due rows are ranked within their tenant
(priority, then due time) and taken round robin in chunks of `chunk` rows per tenant,
so with k tenants due a pass gives each about `limit / k`, and a tenant with one due
occurrence is claimed in the first pass whatever another tenant has queued (within the
first `SCAN` due rows by time). Within a round the tenants any process served least recently
come first (`tenant_turns`, written by every pass): a claimed row is no longer due, so every pass
of a burst meets every tenant in its first round again, and the turns make the passes of every
process go round the tenants rather than draw them afresh. The timer's `FairQueue` then starts
them fairly.
"""

from __future__ import annotations

import logging
import secrets
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, cast

from sqlalchemy import Table, bindparam, delete, func, select, text
from sqlalchemy.orm import Session

from almanac.db import TENANT_SCHEMA, Database, schema_for
from almanac.platform.store import planning
from almanac.platform.decisions import policies
from almanac.platform.store import quotas
from almanac.platform.store.due_index.tenant_parts import array_literal, plan_for_key_lookups
from almanac.platform.store.coordination_models import DueEntry
from almanac.platform.store.sql import statement
from almanac.platform.store.connection_lanes import LANE_OF, Lanes
from almanac.platform.store.models import Occurrence
from almanac.platform.store.contract import Claim
from almanac.platform.store.claim import TenantClaims
from almanac.platform.store.claim_rows import DUE_COLUMNS
from almanac.platform.store.due_index.writes import Part, write_claims
from almanac.platform.store.due_index.reads import read_tenants
from almanac.platform.store.record import _TOKENS, Finish, Records, _Fenced, log_fenced
from almanac.platform.store.due_index.record import is_plain, record_plain, renew_leases

log = logging.getLogger("almanac.scheduler")

D, O = (cast(Table, m.__table__) for m in (DueEntry, Occurrence))  # Core tables, typed so
SCAN = 100_000  # due rows (oldest first) ranked per pass: bounds a pass's cost after a long outage
WANT_FACTOR = 4  # candidates ranked per row wanted: room for other processes' locked rows to be skipped

# The pick's text and the reasons for its shape: sql/statements/due_pick.sql.
_PICK_SQL = statement("due_pick")
_PICK = text(_PICK_SQL.format(lane=""))
# One lane's tenants (`connection_lanes`), and a dead process's runs of any lane.
_PICK_LANE = text(_PICK_SQL.format(lane=f" AND (due_at < :taken OR {LANE_OF} = :lane)"))
_TURNS = text(statement("due_turns"))

_NEXT_DUE = select(func.min(D.c.due_at))
_BACKLOG = text("SELECT tenant_slug, count(*) FROM due_index WHERE due_at <= :now GROUP BY tenant_slug")
_ROWS_LOCKED = (select(*DUE_COLUMNS).where(O.c.id.in_(bindparam("b_ids", expanding=True)),
                                             O.c.due_at <= bindparam("b_now"))
                .order_by(O.c.priority.desc(), O.c.due_at, O.c.id).with_for_update(skip_locked=True))
_EXISTING = select(O.c.id).where(O.c.id.in_(bindparam("b_ids", expanding=True)))
_DROP_ENTRIES = delete(D).where(D.c.tenant_slug == bindparam("b_slug"),
                                D.c.occurrence_id.in_(bindparam("b_ids", expanding=True)))
_DROP_TENANT = delete(D).where(D.c.tenant_slug == bindparam("b_slug"))


def _split_plain(items: Sequence[Finish]) -> tuple[list[tuple[str, list[int]]], list[tuple[str, list[int]]]]:
    """The items' indexes by tenant (tenants sorted): (plain ones, the others); see `due_index.record`.

    An occurrence met twice in the batch (a lapsed attempt and its retry) is never plain: the
    per-tenant path fences it row by row.
    """
    met = Counter((c.tenant, c.occurrence_id) for c, *_ in items)
    plain: dict[str, list[int]] = {}
    rest: dict[str, list[int]] = {}
    for i, (claim, result, _, _) in enumerate(items):
        once = met[(claim.tenant, claim.occurrence_id)] == 1
        # A succeeded run is never retried (`policies.retry_at`), so its retry is None.
        side = plain if once and is_plain(claim, result, None) else rest
        side.setdefault(claim.tenant, []).append(i)
    return sorted(plain.items()), sorted(rest.items())


@dataclass
class DuePass:
    """What one cross-tenant claim did."""

    claims: list[Claim]
    picked: int  # index rows locked (claimed, skipped, expired, queued, recovered, stale...)
    full: bool  # True when `limit` rows were picked: more may be due right now
    recorded: list[tuple[str, int]] = field(default_factory=list)  # (status, count) of non-run records
    next_due_at: datetime | None = None  # when not full: the index's earliest due_at (None: nothing)
    backlog: dict[str, int] | None = None  # when not full: per tenant, rows still due and not claimed
    failed: list[str] = field(default_factory=list)  # tenants whose part was rolled back (logged)


@contextmanager
def _tenant_session(conn: Any, slug: str) -> Iterator[Session]:
    """A session in `conn`'s transaction (it never commits nor rolls back that) with `tenant` mapped to `slug`'s schema."""
    tenant_conn = conn.execution_options(schema_translate_map={TENANT_SCHEMA: schema_for(slug)})
    s = Session(bind=tenant_conn, expire_on_commit=False, join_transaction_mode="rollback_only")
    s.info["tenant"] = slug  # quotas read the tenant from the session
    try:
        yield s
        s.flush()
    finally:
        s.close()


CHUNK_MAX = 8  # rows of a tenant per round robin turn: 100 tenants of a burst are gone round every 800 runs


def fair_chunk(limit: int, share: float) -> int:
    """Rows of one tenant per round-robin round: a small part of a pass, never above the tenant's share."""
    return max(1, min(CHUNK_MAX, int(limit * share)))


NO_PREFERENCE = "{}"  # `preferred(())`: no tenant's rows before the others'
# Rows due this long ago or more come before every round: a dead process's runs in flight, made due
# `policies.REAPED_AHEAD` early when it was reaped (they were started once already), and work left by an
# outage this long.
TAKEN_OVER_BEFORE = policies.REAPED_AHEAD / 2


def preferred(prefer: Collection[str]) -> str:
    """The tenants in `prefer` as `_PICK`'s :mine (a text array), made once per `claim_across`:
    a process holds a few hundred tenants' leases, and a pass picks once per lane it visits."""
    return array_literal(sorted(prefer), "varchar")


def pick_parameters(now: datetime, limit: int, share: float, seed: int, cap: int = SCAN,
                    mine: str = NO_PREFERENCE) -> dict[str, Any]:
    """`_PICK`'s parameters for a pass of up to `limit` rows, at most `cap` of a tenant: the rows taken
    over (`TAKEN_OVER_BEFORE`) first, then round by round, within each the rows of the tenants in `mine`
    (`preferred`) first; `seed` (0 to 2**63 - 1) varies the round robin's tie order."""
    return {"now": now, "scan": SCAN, "chunk": fair_chunk(limit, share), "want": WANT_FACTOR * limit,
            "limit": limit, "seed": seed, "cap": cap, "mine": mine, "taken": now - TAKEN_OVER_BEFORE}


class DueIndex:
    """The claim, lease renewal and record across tenants through the shared due index (PostgreSQL).

    Each picked tenant's rows are decided by the store's own per-tenant decisions (`claims`,
    `TenantClaims.claim_rows`); this class batches the reads and writes of many tenants into a
    few statements, and falls back to a savepoint per tenant (`claim_tenant_by_tenant`) when an
    optimistic pass fails, so that a broken tenant costs only its own rows.
    """

    def __init__(self, db: Database, claims: TenantClaims, records: Records, lanes: Lanes | None) -> None:
        self.db = db
        self.claims = claims
        self.records = records
        self.lanes = lanes  # None, or with ALMANAC_PG_LANES each tenant's work on one connection
        self.rules = claims.rules
        self.lease_margin_s = claims.lease_margin_s

    def finish_across(self, items: Sequence[Finish]) -> Sequence[bool | None] | None:
        """Record finished attempts of many tenants, optimistically, in ONE transaction per lane
        (`connection_lanes`: each run on the connection of the lane that claimed it); whether each applied.

        A burst spread over many tenants finishes a few runs per tenant at a time: a transaction
        per tenant (BEGIN, the fenced release, the runs' records, COMMIT) cost more round trips
        than the records themselves. Here the plain attempts (succeeded, no effects) of every
        tenant are recorded by one statement per `tenant_parts.TENANTS_PER_STATEMENT` tenants
        (`due_index.record`), and the others tenant by tenant (`_finish_batch`, optimistic)
        on the same connection, its schema mapped in turn, tenants in one order (no lock cycles).
        When a plain attempt had lost its lease, its transaction is rolled back and its items are
        None: not recorded, for the caller to record tenant by tenant (`finish_many`, which tells
        held from fenced); None for the whole when nothing was recorded. Another attempt that lost
        its lease is refused in place (False, and a `run.fenced` line). Any other failure rolls
        its transaction back: with lanes, that lane's items are None (logged); without, it raises.
        """
        lanes = self.lanes
        if not lanes:
            return self._finish_on(self.db.engine, items)
        of = lanes.of(claim.tenant for claim, *_ in items)
        by_lane: dict[int, list[int]] = {}
        for i, (claim, *_) in enumerate(items):
            by_lane.setdefault(of[claim.tenant], []).append(i)
        applied: list[bool | None] = [None] * len(items)
        for lane, where in sorted(by_lane.items()):
            try:
                with lanes.held(lane, wait=True):
                    got = self._finish_on(lanes.engines[lane], [items[i] for i in where])
            except Exception:  # the lanes before it stay recorded: only this lane's runs are left to the caller
                log.exception("run.batch_record_failed", extra={"event": "run.batch_record_failed", "runs": len(where)})
                got = None
            for j, i in enumerate(where):
                applied[i] = None if got is None else got[j]
        return None if all(ok is None for ok in applied) else applied

    def _finish_on(self, engine: Any, items: Sequence[Finish]) -> list[bool] | None:
        """`finish_across`'s transaction on one engine's connection; None: rolled back, nothing recorded."""
        plain, rest = _split_plain(items)
        applied: list[bool] = [False] * len(items)
        try:
            with engine.connect() as conn, conn.begin():
                plan_for_key_lookups(conn)
                if plain:
                    parts = [(slug, [items[i] for i in where]) for slug, where in plain]
                    if not record_plain(conn, parts, lambda item: self.records.finish_values(item[0], item[1], item[2], item[3], None)):
                        raise _Fenced
                    for _, where in plain:
                        for i in where:
                            applied[i] = True
                for slug, where in rest:
                    with _tenant_session(conn, slug) as s:
                        for i, ok in zip(where, self.records.finish_batch(s, [items[i] for i in where], optimistic=True)):
                            applied[i] = ok
        except _Fenced:
            return None
        log_fenced(items, applied)  # the per-tenant part refuses a lapsed attempt without a rollback
        return applied

    def claim_across(self, now: datetime, limit: int, *, share: float = 0.5,
                     tenant_exists: Any = None, prefer: Collection[str] = ()) -> DuePass:
        """Claim up to `limit` due occurrences of any tenants, fairly between them: one transaction,
        or with lanes (`connection_lanes`) one per lane visited. Within each round of the round robin, the rows
        of the tenants in `prefer` (the process's timer leases) come before the other tenants'.

        Each tenant's part runs straight in the transaction (a savepoint each cost two round
        trips per tenant, as much as its claim's reads); should any part fail, all of it is
        rolled back and the pass is made again with a savepoint per tenant, so that a broken
        tenant costs only its own rows. `tenant_exists(slug)`: asked only about a tenant whose
        part failed, so that the index rows of a tenant that is gone are dropped rather than
        retried forever.
        """
        lanes, first = self.lanes, preferred(prefer)
        if not lanes:
            return self._claim_on(self.db.engine, None, now, limit, share, tenant_exists, first)
        out = DuePass([], 0, False)
        recorded: Counter[str] = Counter()

        def visit(lane: int, quota: int, cap: int) -> None:
            batch = self._claim_on(lanes.engines[lane], (lane, len(lanes), cap), now, quota, share, tenant_exists,
                                   first)
            lanes.claimed(lane, batch.picked)
            out.claims.extend(batch.claims)
            out.picked += batch.picked
            out.failed.extend(batch.failed)
            recorded.update(dict(batch.recorded))

        # First round: every lane in turn, the least served first (`Lanes.rotation`: waited for if a
        # record holds it), no tenant above its round-robin chunk (a tenant with one due occurrence is
        # claimed in this pass whatever another lane's tenants have queued); another lane that another
        # thread holds is left for the second.
        # Second round: the rest of the pass, from the lanes that gave.
        again: list[int] = []
        order = lanes.rotation(now)
        try:
            for lane in order:
                if out.picked >= limit:
                    break
                with lanes.held(lane, wait=lane == order[0]) as mine:
                    if not mine:
                        again.append(lane)
                        continue
                    before = out.picked
                    visit(lane, limit - out.picked, fair_chunk(limit, share))
                    if out.picked > before:
                        again.append(lane)
        finally:
            lanes.done(order[0])
        for lane in again:
            if out.picked >= limit:
                break
            with lanes.held(lane, wait=True):
                visit(lane, limit - out.picked, SCAN)
        out.recorded, out.full = sorted(recorded.items()), out.picked >= limit
        if not out.full:
            with self.db.engine.connect() as conn:
                out.next_due_at = conn.execute(_NEXT_DUE).scalar()
                out.backlog = {slug: n for slug, n in conn.execute(_BACKLOG, {"now": now})}
        return out

    def _claim_on(self, engine: Any, lane: tuple[int, int, int] | None, now: datetime, limit: int, share: float,
                  tenant_exists: Any, mine: str) -> DuePass:
        """`claim_across` on one engine's connection; `lane`: (lane, lanes, most rows of a tenant);
        `mine`: the preferred tenants (`preferred`)."""
        try:
            return self._claim_pass(now, limit, share, None, engine, lane, mine)
        except Exception:
            log.warning("scheduler.claim_retried", extra={"event": "scheduler.claim_retried"}, exc_info=True)
        return self.claim_tenant_by_tenant(now, limit, share, tenant_exists or (lambda slug: True), engine, lane, mine)

    def claim_tenant_by_tenant(self, now: datetime, limit: int, share: float, tenant_exists: Callable[[str], bool],
                               engine: Any = None, lane: tuple[int, int, int] | None = None,
                               mine: str = NO_PREFERENCE) -> DuePass:
        """The savepoint fallback: the pass again, each tenant's part read, decided and written in a
        savepoint of its own, so that a tenant whose part fails (logged; its index rows dropped if
        `tenant_exists` says it is gone) costs only its own rows. Slower (two round trips a tenant
        more), so it runs only after an optimistic pass failed."""
        return self._claim_pass(now, limit, share, tenant_exists, engine, lane, mine)

    def _claim_pass(self, now: datetime, limit: int, share: float, tenant_exists: Any, engine: Any = None,
                    lane: tuple[int, int, int] | None = None, mine: str = NO_PREFERENCE) -> DuePass:
        """One claim transaction on `engine`'s connection (the process's pool by default); `tenant_exists`
        None: optimistic (any failure raises, all rolled back). `lane`: (lane, lanes, most rows of a tenant).

        Without a `lane` it says, when it did not fill `limit`, when to look again (the lanes' caller does).
        """
        claims: list[Claim] = []
        recorded: Counter[str] = Counter()
        failed: list[str] = []
        began = time.monotonic()
        with (engine or self.db.engine).connect() as conn, conn.begin():
            if lane is None:
                params = pick_parameters(now, limit, share, secrets.randbits(63), mine=mine)
                picked = conn.execute(_PICK, params).all()
            else:
                params = pick_parameters(now, limit, share, secrets.randbits(63), cap=lane[2], mine=mine)
                picked = conn.execute(_PICK_LANE, {**params, "lane": lane[0], "lanes": lane[1]}).all()
            by_tenant: dict[str, list[int]] = {}
            for slug, oid in picked:
                by_tenant.setdefault(slug, []).append(oid)
            if by_tenant:  # after the pick, whose plan is shaped for the server's costs (above)
                plan_for_key_lookups(conn)
            limits = quotas.quotas_of_many(conn, sorted(by_tenant)) if by_tenant else {}
            deferred: list[tuple[str, Any]] = []
            # Optimistic: every tenant's rows and what deciding them needs, read by a few statements.
            reads = read_tenants(conn, list(by_tenant.items()), now, self.claims.source_known) if tenant_exists is None else {}
            for slug, ids in by_tenant.items():
                # Leases count from this tenant's part, not from `now`: on a busy database a pass takes
                # seconds, and leases counted from its start lapsed before the last tenants' runs began.
                at = (now, now + timedelta(seconds=time.monotonic() - began))
                if tenant_exists is None:  # its plans and claims written with the others' at the end
                    batch = self._claim_tenant(conn, slug, ids, at, limits[slug], reads=reads[slug])
                    deferred.append((slug, batch))
                else:
                    batch = self._claim_tenant_in_savepoint(conn, slug, ids, at, limits[slug], tenant_exists)
                    if batch is None:
                        failed.append(slug)
                        continue
                claims.extend(batch.claims)
                recorded.update(batch.recorded)
            if deferred:
                claims.extend(self._write_deferred(conn, deferred, now))
            # The tenants given a whole chunk had their turn: the next passes, this process's and the others',
            # serve others first. One cut short by the pass's end, or with less due, keeps its place.
            served = sorted(slug for slug, ids in by_tenant.items() if len(ids) >= params["chunk"])
            if served:
                conn.execute(_TURNS, {"slugs": served})
            full = len(picked) >= limit
            next_due = backlog = None
            if not full and lane is None:
                next_due = conn.execute(_NEXT_DUE).scalar()
                backlog = {slug: n for slug, n in conn.execute(_BACKLOG, {"now": now})}
        return DuePass(claims, len(picked), full, sorted(recorded.items()), next_due, backlog, failed)

    def _claim_tenant_in_savepoint(self, conn: Any, slug: str, ids: list[int], at: tuple[datetime, datetime],
                            limits: Any, tenant_exists: Any) -> Any:
        """`_claim_tenant` in a savepoint: a failure costs only this tenant's rows (None, logged)."""
        try:
            with conn.begin_nested():
                return self._claim_tenant(conn, slug, ids, at, limits)
        except Exception:
            log.exception("scheduler.claim_failed", extra={"event": "scheduler.claim_failed", "tenant": slug})
            if not tenant_exists(slug):
                conn.execute(_DROP_TENANT, {"b_slug": slug})
            return None

    def renew_across(self, claims: Sequence[Claim], now: datetime) -> set[tuple[str, int]]:
        """`renew_leases` for the claims of many tenants in one transaction; (tenant, run id) of those not held.

        Renewal is the one periodic write per tenant left (a run's lease lives with its occurrence,
        in the tenant's schema): one transaction for all of them, and one statement per chunk of
        tenants with claims in flight, rather than a transaction a tenant and a statement a claim.
        """
        by_tenant: dict[str, list[Claim]] = {}
        for c in claims:
            if c.occurrence_id is not None:
                by_tenant.setdefault(c.tenant, []).append(c)
        parts = [(slug, sorted(mine, key=lambda c: c.occurrence_id or 0)) for slug, mine in sorted(by_tenant.items())]
        lost: set[tuple[str, int]] = set()
        with self.db.engine.connect() as conn, conn.begin():
            # One statement per chunk of tenants (`due_index.record.renew_leases`), not one a claim.
            renewed = renew_leases(conn, [(slug, [(c.occurrence_id or 0, c.lease_token or "",
                                                   policies.lease_until(now, c.timeout_ms, self.lease_margin_s))
                                                  for c in mine]) for slug, mine in parts])
            for slug, mine in parts:  # not renewed: recorded meanwhile, or taken over after a lapse?
                missed = [c for c in mine if (slug, c.occurrence_id) not in renewed]
                if missed:
                    conn.execution_options(schema_translate_map={TENANT_SCHEMA: schema_for(slug)})
                    current = dict(conn.execute(_TOKENS, {"b_ids": [c.occurrence_id for c in missed]}).all())
                    lost |= {(slug, c.run_id) for c in missed if current.get(c.occurrence_id) != c.lease_token}
        return lost

    def _write_deferred(self, conn: Any, deferred: list[tuple[str, Any]], now: datetime) -> list[Claim]:
        """The deferred plans and claims of these tenants' parts, by one statement per 64 tenants; the claims."""
        parts = []
        for slug, batch in deferred:
            occurrences, nexts = planning.next_occurrences(batch.plans, now, self.rules) if batch.plans else ([], [])
            parts.append(Part(slug, occurrences, nexts, [self.claims.run_values(p, now) for p in batch.pending],
                              [(p.row.id, p.row.status, p.row.attempt, p.token, p.lease) for p in batch.pending]))
        run_ids = write_claims(conn, parts)
        return [self.claims.claim_of(slug, p, run_ids[(slug, p.row.id)], now)
                for slug, batch in deferred for p in batch.pending]

    def _claim_tenant(self, conn: Any, slug: str, ids: list[int], at: tuple[datetime, datetime],
                      limits: Any, *, reads: Any = None) -> Any:
        """One tenant's part of the claim, its quotas read already (`limits`); `at`: (the pass's now, the leases' start).

        `reads` (the optimistic pass): its rows locked and read already with the other tenants'
        (`due_index.reads`), and its plans and claims left to the pass (`_write_deferred`).
        Without: read and written here, in the caller's savepoint.
        """
        now, lease_from = at
        with _tenant_session(conn, slug) as s:
            s.info["quotas"] = limits
            if reads is None:
                rows = list(s.execute(_ROWS_LOCKED, {"b_ids": ids, "b_now": now}).all())
            else:
                rows = reads.rows
            if len(rows) < len(ids):
                self._drop_orphans(s, slug, ids, {r.id for r in rows})
            return self.claims.claim_rows(s, slug, rows, now, lease_from, defer=reads is not None, reads=reads)

    @staticmethod
    def _drop_orphans(s: Session, slug: str, ids: list[int], read: set[int]) -> None:
        """Index rows whose occurrence is gone (a trigger-less write, a restore): drop them.

        An occurrence merely locked by another transaction still exists and keeps its row.
        """
        missing = [oid for oid in ids if oid not in read]
        gone = set(missing) - set(s.execute(_EXISTING, {"b_ids": missing}).scalars())
        if gone:
            s.execute(_DROP_ENTRIES, {"b_slug": slug, "b_ids": sorted(gone)})
            log.warning("scheduler.due_index_orphans", extra={"event": "scheduler.due_index_orphans",
                                                              "tenant": slug, "rows": len(gone)})
