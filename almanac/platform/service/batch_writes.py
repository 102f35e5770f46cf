"""Batches of schedules and jobs (SPEC sections 7 and 8): up to 1,000 items in the caller's one transaction.

All or none. One validation pass looks at every item first (scripts exist, rules parse and fire,
keys are not repeated) and, if any item is bad, raises `BatchRefused` naming each bad item by its
index; nothing has been written by then. The quota is checked once for the whole batch. Then the
rows go in with a few statements however many items there are (ids from one query, one pipelined
executemany or, for new schedules on PostgreSQL, one binary COPY; one DELETE, executemany UPDATEs),
and occurrences are planned through `planning` (`plan_created` for new schedules, whose next_run_at
is computed before their INSERT; `plan_jobs` for jobs), so whatever planning maintains (the due
index) is maintained for batches too. Nothing here commits.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from operator import itemgetter
from types import SimpleNamespace
from datetime import datetime
from typing import Any

from sqlalchemy import bindparam, func, insert, select, text
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from almanac.errors import AlmanacError, Conflict, ValidationError
from almanac.platform.service import calendar_store
from almanac.platform.store import planning
from almanac.platform.store import quotas
from almanac.platform.store.executemany import Bulk, CopyRows
from almanac.platform.store.models import JOB_CANCELLED, JOB_PENDING, Job, Schedule, Script
from almanac.platform.service.resources import POLICY_FIELDS, dumps, parse_rule

BATCH_MAX = 1000
CREATED, REPLACED, UNCHANGED = "created", "replaced", "unchanged"
# Fields of a job that, if all equal to what is stored, make an upsert `unchanged`.
JOB_FIELDS = ("script_id", "run_at", "payload", "expire_after_s", "max_attempts", "priority")
_SHOWN_ERRORS = 3  # items named in the message; every one is in `details`


class BatchRefused(ValidationError):
    """One or more items are bad: the whole batch is refused (422 validation_error), each listed by index."""

    def __init__(self, problems: list[tuple[int, AlmanacError]]) -> None:
        # Each item's message is a sentence of its own; in this one sentence it loses its full stop.
        first = "; ".join(f"item {i}: {err.message.rstrip('.')}" for i, err in problems[:_SHOWN_ERRORS])
        more = f" (and {len(problems) - _SHOWN_ERRORS} more)" if len(problems) > _SHOWN_ERRORS else ""
        super().__init__(f"Nothing was saved: {first}{more}.", details={"errors": [
            {"index": i, "code": err.code, "message": err.message} for i, err in problems]})


def _check_size(items: list[Any]) -> None:
    if len(items) > BATCH_MAX:  # the API's schema says so too; the core does not rely on it
        raise ValidationError(f"A batch holds at most {BATCH_MAX} items; this one has {len(items)}.")


def _missing_scripts(s: Session, items: list[dict[str, Any]]) -> set[int]:
    wanted = {item["script_id"] for item in items}
    found = set(s.execute(select(Script.id).where(Script.id.in_(wanted))).scalars()) if wanted else set()
    return wanted - found


def _script_problem(script_id: int) -> AlmanacError:
    return ValidationError(f"there is no script {script_id}")


# -- schedules ----------------------------------------------------------------------------


def create_schedules(s: Session, rules: planning.Rules, items: list[dict[str, Any]], *, now: datetime,
                     min_interval_s: int) -> list[Any]:
    """Create every schedule of `items` (each as `service.create_schedule` takes it), in order, or none."""
    _check_size(items)
    recs = _vetted_rules(s, items, now, min_interval_s)
    businesses = _calendars(s, items, recs, now)
    quotas.check_schedules(s, quotas.of(s), adding=len(items))
    if not items:
        return []
    rows = [_schedule_row(item, rec, business, now) for item, rec, business in zip(items, recs, businesses)]
    # Each one's first occurrence is known before the INSERT (what `plan_next_many` would record), so
    # next_run_at goes in with the row rather than by an UPDATE of every row after it.
    once = _OncePerBatch(rules)
    for row in rows:
        row["next_run_at"] = once.next_after(row["rrule"], row["input_kind"], now) if row["enabled"] else None
    ids = _insert_rows(s, Schedule, rows, clash_free=True)
    # Plain objects standing for the rows (ORM instances cost more than the inserts): planning and the
    # API read their fields; they are not in the session.
    created = [SimpleNamespace(id=sid, paused_reason=None, pause_note=None, **row) for sid, row in zip(ids, rows)]
    planning.plan_created(s, created, now)
    return created


def _vetted_rules(s: Session, items: list[dict[str, Any]], now: datetime, min_interval_s: int) -> list[Any]:
    """Each item's parsed rule; `BatchRefused` naming every bad item (no such script, a bad rule)."""
    missing = _missing_scripts(s, items)
    problems: list[tuple[int, AlmanacError]] = []
    parsed: dict[tuple[Any, ...], Any] = {}  # a batch often repeats one rule: parse and vet it once
    recs = []
    for i, item in enumerate(items):
        if item["script_id"] in missing:
            problems.append((i, _script_problem(item["script_id"])))
            continue
        key = (item["rule"], item["timezone"], item.get("start"))
        if key not in parsed:
            try:
                parsed[key] = parse_rule(item["rule"], item["timezone"], item.get("start"), now, min_interval_s)
            except AlmanacError as exc:
                parsed[key] = exc
        if isinstance(parsed[key], AlmanacError):
            problems.append((i, parsed[key]))
        recs.append(parsed[key])
    if problems:
        raise BatchRefused(problems)
    return recs


def _calendars(s: Session, items: list[dict[str, Any]], recs: list[Any], now: datetime) -> list[Any]:
    """Each item's business calendar (most have none); `BatchRefused` naming every bad one."""
    problems: list[tuple[int, AlmanacError]] = []
    found = []
    for i, (item, rec) in enumerate(zip(items, recs)):
        try:
            found.append(calendar_store.named(s, rec, item.get("calendar"), item.get("calendar_policy"), now))
        except AlmanacError as exc:
            problems.append((i, exc))
    if problems:
        raise BatchRefused(problems)
    return found


class _OncePerBatch:
    """The batch's rules, each (rule, time) evaluated once: items of a batch often share both."""

    def __init__(self, rules: planning.Rules) -> None:
        self.rules = rules
        self.seen: dict[tuple[str, str, datetime], datetime | None] = {}

    def next_after(self, rrule: str, input_kind: str, after: datetime) -> datetime | None:
        key = (rrule, input_kind, after)
        if key not in self.seen:
            self.seen[key] = self.rules.next_after(rrule, input_kind, after)
        return self.seen[key]

    def times_between(self, rrule: str, input_kind: str, after: datetime, until: datetime, cap: int) -> list[datetime]:
        return self.rules.times_between(rrule, input_kind, after, until, cap)


def _schedule_row(item: dict[str, Any], rec: Any, business: Any, now: datetime) -> dict[str, Any]:
    payload = item.get("payload")
    return dict(
        name=item["name"], script_id=item["script_id"], rule_text=item["rule"], input_kind=rec.input_kind,
        timezone=rec.timezone, **calendar_store.schedule_fields(rec, business), payload=_NULL if payload is None else dumps(payload),
        enabled=item["enabled"], priority=item["priority"], version=1, created_at=now, updated_at=now,
        failures_in_row=0, pause_after_failures=item.get("pause_after_failures"),
        **{name: item[name] for name in POLICY_FIELDS},
    )


_NULL = dumps(None)  # most items carry no payload


# -- jobs ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class JobOutcome:
    key: str
    outcome: str  # created | replaced | unchanged
    state: str


def upsert_jobs(s: Session, items: list[dict[str, Any]], now: datetime) -> list[JobOutcome]:
    """Upsert every job of `items` (each `{key, script_id, run_at, payload, ...}`), in order, or none.

    Each item means what `PUT /api/v1/jobs/{key}` means: a new key creates a job; a new time (or a
    cancelled job) replaces what is planned; other changes keep the plan and update the job; an
    item equal to the stored job changes nothing (`unchanged`). A key twice in one batch is refused.
    """
    _check_size(items)
    problems = _job_problems(s, items)
    if problems:
        raise BatchRefused(problems)
    keys = [item["key"] for item in items]
    existing = {job.key: job for job in s.execute(
        select(Job).where(Job.key.in_(keys)).with_for_update()).scalars()} if keys else {}
    values = [dict(item, payload=dumps(item.get("payload"))) for item in items]
    new = [v for v in values if v["key"] not in existing]
    fresh_pending = len(new) + sum(1 for v in values if v["key"] in existing
                                   and existing[v["key"]].state != JOB_PENDING)
    if fresh_pending:  # replacing a pending job is free, as for PUT
        quotas.check_pending_jobs(s, quotas.of(s), adding=fresh_pending)
    outcomes: dict[str, str] = {}
    replan: list[Job] = []
    changes: list[Job] = []
    for v in values:
        job = existing.get(v["key"])
        if job is None:
            continue
        same = all(getattr(job, name) == v[name] for name in JOB_FIELDS) and job.state != JOB_CANCELLED
        outcomes[v["key"]] = UNCHANGED if same and job.root_key == v["key"] and job.depth == 0 else REPLACED
        if outcomes[v["key"]] == REPLACED:
            retime = job.run_at != v["run_at"] or job.state == JOB_CANCELLED
            for name in JOB_FIELDS:
                setattr(job, name, v[name])
            job.root_key, job.depth, job.created_by_run_id, job.updated_at = v["key"], 0, None, now
            (replan if retime else changes).append(job)
    created = _insert_jobs(s, new, now)
    s.flush()  # the replaced jobs' new fields, before planning reads the rows
    planning.plan_jobs(s, created, now, fresh=True)
    planning.plan_jobs(s, replan, now)  # sets each one's state: done if it ran at that time already
    planning.reprioritise_jobs(s, changes)
    states = {job.key: job.state for job in [*created, *replan, *existing.values()]}
    return [JobOutcome(v["key"], outcomes.get(v["key"], CREATED), states[v["key"]]) for v in values]


def _job_problems(s: Session, items: list[dict[str, Any]]) -> list[tuple[int, AlmanacError]]:
    missing = _missing_scripts(s, items)
    seen: dict[str, int] = {}
    problems: list[tuple[int, AlmanacError]] = []
    for i, item in enumerate(items):
        if item["key"] in seen:
            problems.append((i, ValidationError(f"the key {item['key']!r} is also item {seen[item['key']]}")))
        elif item["script_id"] in missing:
            problems.append((i, _script_problem(item["script_id"])))
        seen.setdefault(item["key"], i)
    return problems


def _insert_jobs(s: Session, rows: list[dict[str, Any]], now: datetime) -> list[Any]:
    """Insert new jobs; plain objects standing for the rows (not in the session)."""
    if not rows:
        return []
    full = [dict(row, state=JOB_PENDING, root_key=row["key"], depth=0, created_by_run_id=None,
                 created_at=now, updated_at=now) for row in rows]
    ids = _insert_rows(s, Job, full)
    return [SimpleNamespace(id=job_id, **row) for job_id, row in zip(ids, full)]


def _insert_rows(s: Session, model: Any, rows: list[dict[str, Any]], *, clash_free: bool = False) -> list[int]:
    """Insert the rows with new ids; the ids, in order.

    The ids are taken first (an INSERT ... RETURNING of 1,000 rows made SQLAlchemy and psycopg build
    and parse one huge statement per batch, most of a batch's time): on PostgreSQL from the table's
    own sequence, all in one query; on SQLite as max + 1 on, which are ours because the transaction
    began IMMEDIATE (it holds the write lock), and are exactly the ids SQLite would choose. The rows
    then go in by one pipelined executemany, or, on PostgreSQL for rows with no unique key but their
    new id (`clash_free`: schedules), by one binary COPY. A clash all the same (a unique key: a job
    created at the same time) is a 409, as for PUT; nothing is saved.
    """
    conn = s.connection()
    table = model.__table__
    if conn.dialect.name == "postgresql":
        schema = (conn.get_execution_options().get("schema_translate_map") or {}).get(table.schema, table.schema)
        ids = s.execute(_NEW_IDS, {"t": f'"{schema}".{table.name}', "n": len(rows)}).scalar_one()
        if clash_free:
            columns = tuple(rows[0])
            values = itemgetter(*columns)
            _copy_rows(table, columns).write(conn, ((new_id, *values(row)) for new_id, row in zip(ids, rows)))
            return ids
    else:
        start = s.execute(select(func.coalesce(func.max(table.c.id), 0))).scalar_one() + 1
        ids = list(range(start, start + len(rows)))
    try:
        _bulk_insert(table, tuple(rows[0])).executemany(
            conn, [{"b_id": new_id, **{"b_" + k: v for k, v in row.items()}} for row, new_id in zip(rows, ids)])
    except IntegrityError:
        raise Conflict("Another request created one of these at the same time; retry.") from None
    return ids


# One row (an array) rather than 1,000: a third of the time to fetch.
_NEW_IDS = text("SELECT array_agg(v ORDER BY v) FROM (SELECT nextval(pg_get_serial_sequence(:t, 'id')) AS v "
                "FROM generate_series(1, :n)) AS ids")


@lru_cache(maxsize=8)
def _bulk_insert(table: Any, columns: tuple[str, ...]) -> Bulk:
    return Bulk(insert(table).values({name: bindparam("b_" + name) for name in ("id", *columns)}))


@lru_cache(maxsize=8)
def _copy_rows(table: Any, columns: tuple[str, ...]) -> CopyRows:
    return CopyRows(table, ("id", *columns))
