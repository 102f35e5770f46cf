"""The finishing transaction of `SqlStore`: record how attempts ended, each fenced by its lease token.

`finish_many` records many attempts of one tenant in one transaction. An
attempt's record applies only while its occurrence still holds the attempt's
lease token; its effects (kv writes, events, `schedule.at` upserts, carried by
its `RunResult`) are applied only if it succeeded, that fence held and the
tenant's quotas, checked again here exactly (`effects.refusal`), still allow them;
past a quota the run is recorded `failed` with the quota's message instead.

The common case, every attempt still holding its lease and done for good, costs
three executemany statements (driver executemany, `bulk.Bulk`) for the whole batch: release the occurrences (each
UPDATE repeats its own token in its WHERE), finish the runs, mark the jobs done.
If the release changed fewer rows than it was given, some attempt lost its lease:
the transaction is rolled back and the batch recorded again the careful way, which
reads the rows under lock and tells the held from the fenced one by one.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any, cast

from sqlalchemy import Table, bindparam, null, select, update
from sqlalchemy.orm import Session

from almanac.db import Database
from almanac.platform.store import run_effects
from almanac.platform.store import failures
from almanac.platform.decisions import policies
from almanac.platform.store.executemany import Bulk
from almanac.platform.store.models import DONE, JOB_DONE, JOB_PENDING, PLANNED, QUEUED, RUNNING, Job, Occurrence, Run
from almanac.platform.runner import retried
from almanac.platform.store.contract import Claim
from almanac.sandbox.contract import NO_EFFECTS, RunResult

log = logging.getLogger("almanac.scheduler")

Finish = tuple[Claim, RunResult, datetime, datetime]  # what finish_many records, per attempt: started, now

O, R, J = (cast(Table, m.__table__) for m in (Occurrence, Run, Job))  # Core tables, typed so

ENDINGS = {
    "succeeded": "the script returned",
    "failed": "the script threw an error",
    "timed_out": "the script ran over its time limit",
    "memory_exceeded": "the script went over its memory limit",
}

_RELEASE = Bulk(update(O).where(
    O.c.id == bindparam("b_id"), O.c.lease_token == bindparam("b_token"), O.c.status == RUNNING,
).values(status=DONE, due_at=null(), lease_token=null(), lease_until=null()))
_HELD = select(O.c.id, O.c.lease_token).where(O.c.id.in_(bindparam("b_ids", expanding=True)), O.c.status == RUNNING)
_HELD_LOCKED = _HELD.order_by(O.c.id).with_for_update()
_FINISH_RUN = Bulk(update(R).where(R.c.id == bindparam("b_id"), R.c.lease_token == bindparam("b_token")).values(
    status=bindparam("b_status"), reason=bindparam("b_reason"), started_at=bindparam("b_started"),
    finished_at=bindparam("b_finished"), output=bindparam("b_output"), error=bindparam("b_error"),
    error_line=bindparam("b_error_line"), logs=bindparam("b_logs"), duration_ms=bindparam("b_duration"),
    event=bindparam("b_event"), cpu_ms=bindparam("b_cpu"),
    http=bindparam("b_http"),
))
_FINISH_JOB = Bulk(update(J).where(
    J.c.id == bindparam("b_id"), J.c.state == JOB_PENDING, J.c.run_at == bindparam("b_run_at"),
).values(state=JOB_DONE, updated_at=bindparam("b_now")))
# Queued occurrences of these schedules become due now (their running attempt ended); the claim
# side uses it too, when it recovers a lapsed attempt.
RELEASE_QUEUED = update(O).where(O.c.schedule_id.in_(bindparam("b_ids", expanding=True)),
                                  O.c.status == QUEUED).values(due_at=bindparam("b_now"))


ERROR_MAX = 64 * 1024  # characters of an error message kept when its record has to be simplified


def valid_text(text: str) -> str:
    """`text` with whatever is not a Unicode scalar value (a lone surrogate) replaced by "?"."""
    return text.encode("utf-8", "replace").decode("utf-8")


_RENEW = Bulk(update(O).where(
    O.c.id == bindparam("b_id"), O.c.lease_token == bindparam("b_token"), O.c.status == RUNNING,
).values(lease_until=bindparam("b_lease"), due_at=bindparam("b_lease")))
_TOKENS = select(O.c.id, O.c.lease_token).where(O.c.id.in_(bindparam("b_ids", expanding=True)))


def log_fenced(items: Sequence[Finish], applied: Sequence[bool]) -> None:
    """One warning per attempt whose record was refused: its lease had passed to another process."""
    for (claim, *_), ok in zip(items, applied):
        if not ok:
            log.warning("run.fenced", extra={"event": "run.fenced", "run_id": claim.run_id})


class _Fenced(Exception):
    """The optimistic release found an attempt that lost its lease: record the batch the careful way."""


class Records:
    """Finished attempts of one tenant recorded, and their leases renewed, each fenced by its lease token."""

    def __init__(self, db: Database, lease_margin_s: float) -> None:
        self.db = db
        self.is_postgres = not db.is_sqlite
        self.lease_margin_s = lease_margin_s

    def finish(self, claim: Claim, result: RunResult, started: datetime, now: datetime) -> bool:
        return self.finish_many([(claim, result, started, now)])[0]

    def finish_many(self, items: Sequence[Finish]) -> list[bool]:
        """`finish` for many attempts of one tenant, in one transaction; each fenced by its own token.

        Returns, in order, whether each record applied. If the transaction fails nothing
        is recorded (the caller may then finish the attempts one by one).
        """
        tenants = {claim.tenant for claim, *_ in items}
        if len(tenants) != 1:
            raise ValueError("finish_many records the attempts of one tenant at a time")
        tenant = tenants.pop()
        try:
            with self.db.tenant_session(tenant) as s:
                applied = self.finish_batch(s, items, optimistic=True)
        except _Fenced:  # rolled back: nothing of the optimistic attempt remains
            with self.db.tenant_session(tenant) as s:
                applied = self.finish_batch(s, items, optimistic=False)
        log_fenced(items, applied)
        return applied

    def renew_leases(self, tenant: str, claims: Sequence[Claim], now: datetime) -> set[int]:
        """Extend the claims' leases from `now` (each its script's timeout + the margin); run ids not held.

        One executemany fenced by each claim's own token; only when it changed fewer rows
        than it was given are the rows read to tell which were lost (recorded meanwhile, or
        taken over by another process after a lapse).
        """
        claims = [c for c in claims if c.occurrence_id is not None]
        if not claims:
            return set()
        with self.db.tenant_session(tenant) as s:
            conn = s.connection()
            rows = [dict(b_id=c.occurrence_id, b_token=c.lease_token,
                         b_lease=policies.lease_until(now, c.timeout_ms, self.lease_margin_s))
                    for c in sorted(claims, key=lambda c: c.occurrence_id or 0)]
            if _RENEW.executemany(conn, rows) == len(rows):
                return set()
            current = dict(conn.execute(_TOKENS, {"b_ids": [c.occurrence_id for c in claims]}).all())
        return {c.run_id for c in claims if current.get(c.occurrence_id) != c.lease_token}

    def finish_unrecordable(self, claim: Claim, result: RunResult, started: datetime, problem: Exception,
                            now: datetime) -> bool:
        error = None if result.error is None else valid_text(result.error)[:ERROR_MAX]
        reason = f"its result could not be recorded ({type(problem).__name__}); ended failed, not retried"
        plain = RunResult("failed", error=error, error_line=result.error_line, duration_ms=result.duration_ms,
                          refused="its result could not be recorded", reason=reason,
                          cpu_ms=result.cpu_ms, event=result.event)
        log.error("run.unrecordable", extra={"event": "run.unrecordable", "run_id": claim.run_id,
                                             "problem": type(problem).__name__})
        return self.finish(claim, plain, started, now)

    def finish_batch(self, s: Session, items: Sequence[Finish], *, optimistic: bool) -> list[bool]:
        conn = s.connection()
        retries = [policies.retry_at(c.policy, r.status, c.attempt, now) if retried(r) else None
                   for c, r, _, now in items]
        # The common case, an occurrence done for good, is released in bulk. An occurrence met twice
        # (a lapsed attempt and its retry) is fenced row by row, as are retries and manual runs.
        counts: dict[int, int] = {}
        for claim, *_ in items:
            if claim.occurrence_id is not None:
                counts[claim.occurrence_id] = counts.get(claim.occurrence_id, 0) + 1
        in_bulk = [r is None and counts.get(c.occurrence_id) == 1 for (c, *_), r in zip(items, retries)]
        done = sorted((c.occurrence_id, c.lease_token) for (c, *_), bulk in zip(items, in_bulk) if bulk)
        if not done:
            held: set[int | None] = set()
        elif optimistic:
            held = self._release_all(conn, done)
        else:
            held = self._release_held(conn, done)
        applied = [
            (c.occurrence_id in held) if bulk else self._fence(s, c, r)
            for (c, *_), r, bulk in zip(items, retries, in_bulk)
        ]
        ok = [(item, r) for item, r, a in zip(items, retries, applied) if a]
        if not ok:
            return applied
        ok = self._apply_effects(s, ok)
        _FINISH_RUN.executemany(conn, [self.finish_values(c, res, started, now, r)
                                       for (c, res, started, now), r in ok])
        failures.record_endings(s, [(c, res) for (c, res, _, _), r in ok if r is None], max(now for (*_, now), _ in ok))
        latest = max(now for (*_, now), _ in ok)
        schedules = sorted({c.schedule_id for (c, *_), _ in ok if c.schedule_id is not None})
        if schedules:
            conn.execute(RELEASE_QUEUED, {"b_ids": schedules, "b_now": latest})
        jobs = [dict(b_id=c.job_id, b_run_at=c.scheduled_for, b_now=now)
                for (c, _, _, now), r in ok if c.job_id is not None and r is None]
        if jobs:
            _FINISH_JOB.executemany(conn, jobs)
        return applied

    @staticmethod
    def _release_all(conn: Any, done: list[tuple[int | None, str]]) -> set[int | None]:
        """Release every occurrence, each fenced by its own token, in one executemany (in id order).

        Raises `_Fenced` (the caller rolls back) unless every row was still held.
        """
        changed = _RELEASE.executemany(conn, [{"b_id": oid, "b_token": token} for oid, token in done])
        if changed != len(done):
            raise _Fenced
        return {oid for oid, _ in done}

    def _release_held(self, conn: Any, done: list[tuple[int | None, str]]) -> set[int | None]:
        """Mark done the occurrences that still hold their attempt's token; return their ids.

        The rows are read under lock (SQLite: the write transaction; PostgreSQL: FOR UPDATE)
        and each is compared with its own token; the held ones are then released by the
        same fenced executemany as the optimistic path.
        """
        current = dict(conn.execute(_HELD_LOCKED if self.is_postgres else _HELD,
                                    {"b_ids": [oid for oid, _ in done]}).all())
        held = [(oid, token) for oid, token in done if current.get(oid) == token]
        if held:
            changed = _RELEASE.executemany(conn, [{"b_id": oid, "b_token": token} for oid, token in held])
            if changed != len(held):  # cannot happen under the lock; never record on a guess
                raise RuntimeError(f"fenced release changed {changed} occurrences, expected {len(held)}")
        return {oid for oid, _ in held}

    @staticmethod
    def finish_values(claim: Claim, result: RunResult, started: datetime, now: datetime,
                       retry: datetime | None) -> dict[str, Any]:
        reason = result.reason or ENDINGS.get(result.status, result.status)
        if retry is not None:
            reason += f"; retry {claim.attempt + 1} of {claim.policy.max_attempts} at {retry.isoformat()}"
        return dict(
            b_id=claim.run_id, b_token=claim.lease_token, b_status=result.status, b_reason=reason[:200],
            b_started=started, b_finished=now,
            b_output=None if result.output is None else json.dumps(result.output),
            b_error=result.error, b_error_line=result.error_line,
            b_logs=json.dumps(list(result.logs)) if result.logs else "[]",
            b_duration=result.duration_ms,
            # ASCII JSON: a payload's lone surrogates stay escapes, which every database stores.
            b_event=None if result.event is None else json.dumps(result.event), b_cpu=result.cpu_ms,
            b_http=json.dumps(list(result.http)) if result.http else None,
        )

    def _fence(self, s: Session, claim: Claim, retry: datetime | None) -> bool:
        """Release the occurrence (or a manual run) only if it still holds our lease token."""
        if claim.occurrence_id is None:
            cond = (R.c.id == claim.run_id) & (R.c.lease_token == claim.lease_token) & (R.c.status == RUNNING)
            return s.execute(update(R).where(cond).values(lease_token=claim.lease_token)).rowcount == 1
        cond = (O.c.id == claim.occurrence_id) & (O.c.lease_token == claim.lease_token) & (O.c.status == RUNNING)
        values = dict(status=PLANNED, due_at=retry) if retry else dict(status=DONE, due_at=None)
        return s.execute(update(O).where(cond).values(lease_token=None, lease_until=None, **values)).rowcount == 1

    def _apply_effects(self, s: Session, ok: list[tuple[Finish, datetime | None]]) -> list[tuple[Finish, datetime | None]]:
        """Apply each succeeded run's effects once its quotas allow them; a refused run is recorded failed instead.

        A refused run was succeeded, so it is not retried (its retry is None) and its occurrence,
        already released as done, stays done.
        """
        charged: list[int] = []  # the batch's kv and job use, read once, charged run by run
        out = []
        for (claim, result, started, now), retry in ok:
            if result.status == "succeeded" and result.effects:
                problem = run_effects.refusal(s, result.effects, charged, claim.chain_root)
                if problem is None:
                    run_effects.apply(s, claim, result.effects, now, postgres=self.is_postgres)
                else:
                    log.warning("run.effects_refused", extra={"event": "run.effects_refused", "run_id": claim.run_id})
                    result = replace(result, status="failed", error=problem, effects=NO_EFFECTS, refused=problem,
                                     reason=f"refused by a platform limit ({problem}); not retried"[:200])
            out.append(((claim, result, started, now), retry))
        return out
