"""Scripts, schedules, jobs, runs and kv as the API uses them: each function works inside
the caller's transaction (one per request) and takes `now`; none commits.

Errors are almanac.errors classes; a missing id and another tenant's id are the same
NotFound, because every query runs in the caller's own tenant schema.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, replace
from datetime import datetime
from functools import lru_cache
from typing import Any, cast

from sqlalchemy import Table, bindparam, case, func, insert, literal, or_, select, true, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from almanac import jsonsafe
from almanac.errors import Conflict, NotFound, ScriptSyntaxError, ValidationError
from almanac.platform import recurrence
from almanac.platform.service import calendar_store
from almanac.platform.store import planning
from almanac.platform.store import quotas
from almanac.platform.store.models import (
    JOB_CANCELLED, JOB_PENDING, KV, PAUSE_NOTE_MAX, PLANNED, QUEUED, RUNNING, Job, Occurrence, Run, Schedule, Script, ScriptVersion,
)

RULE_FIELDS = ("rule", "timezone", "start", "calendar", "calendar_policy")
PLAN_FIELDS = ("enabled", "priority")
POLICY_FIELDS = ("misfire", "catchup_window_s", "overlap", "expire_after_s", "max_attempts", "retry_backoff_s")
MAX_PAGE = 200
# A job's own fields, as PUT takes them (batch.JOB_FIELDS is the same list).
JOB_FIELDS = ("script_id", "run_at", "payload", "expire_after_s", "max_attempts", "priority")


_COMPACT = json.JSONEncoder(separators=(",", ":"))  # one encoder, not one a call


def dumps(value: Any) -> str:
    return _COMPACT.encode(value)


# -- scripts ------------------------------------------------------------------------------


# Appended to a source that parses: a module may have one default export, so the probe parses
# again only when the script has none of its own (`export default ...` or `export {f as default}`).
_DEFAULT_PROBE = "\n;export default 0;\n"


def source_problem(runner: Any, source: str) -> tuple[str, int | None, int | None] | None:
    """(message, line, column) of what keeps `source` from being a script, or None.

    Both checks go through the runner's own parser: first the syntax, then whether the
    module has a default export (a script without one would only fail when run).
    """
    problem = runner.check_syntax(source)
    if problem is not None:
        message, line, column = problem
        return f"The script does not parse: {message}", line, column
    if runner.check_syntax(source + _DEFAULT_PROBE) is None and runner.check_syntax(_DEFAULT_PROBE * 2):
        # (the second call: only a runner whose parser refuses two default exports can tell)
        return ("The script has no default export: write "
                "`export default async function (event) { ... }`.", 1, 1)
    return None


def check_source(runner: Any, source: str) -> None:
    problem = source_problem(runner, source)
    if problem is not None:
        message, line, column = problem
        raise ScriptSyntaxError(message, details={"line": line, "column": column})


def create_script(s: Session, runner: Any, name: str, source: str, timeout_ms: int, memory_mb: int,
                  now: datetime, author: str | None = None) -> Script:
    check_source(runner, source)
    if s.execute(select(Script.id).where(Script.name == name)).first():
        raise Conflict(f"A script named {name!r} exists already.")
    script = Script(name=name, current_version=1, timeout_ms=timeout_ms, memory_mb=memory_mb,
                    created_at=now, updated_at=now)
    s.add(script)
    s.flush()
    s.add(ScriptVersion(script_id=script.id, version=1, source=source, created_at=now, author=author))
    return script


def get_script(s: Session, script_id: int) -> Script:
    script = s.get(Script, script_id)
    if script is None:
        raise NotFound(f"There is no script {script_id}.")
    return script


def script_source(s: Session, script: Script) -> str:
    return s.execute(select(ScriptVersion.source).where(
        ScriptVersion.script_id == script.id, ScriptVersion.version == script.current_version)).scalar_one()


def script_versions(s: Session, script_id: int) -> list[ScriptVersion]:
    """Every version of a script, newest first (NotFound for no such script)."""
    get_script(s, script_id)
    return list(s.execute(select(ScriptVersion).where(ScriptVersion.script_id == script_id)
                          .order_by(ScriptVersion.version.desc())).scalars())


def script_version(s: Session, script_id: int, version: int) -> ScriptVersion:
    script = get_script(s, script_id)
    found = s.execute(select(ScriptVersion).where(ScriptVersion.script_id == script_id,
                                                  ScriptVersion.version == version)).scalar_one_or_none()
    if found is None:
        raise NotFound(f"Script {script.name} has no version {version}.")
    return found


def update_script(s: Session, runner: Any, script_id: int, changes: dict[str, Any], now: datetime,
                  author: str | None = None) -> Script:
    script = get_script(s, script_id)
    if "name" in changes and changes["name"] != script.name:
        if s.execute(select(Script.id).where(Script.name == changes["name"])).first():
            raise Conflict(f"A script named {changes['name']!r} exists already.")
        script.name = changes["name"]
    for name in ("timeout_ms", "memory_mb"):
        if changes.get(name) is not None:
            setattr(script, name, changes[name])
    if changes.get("source") is not None:
        check_source(runner, changes["source"])
        script.current_version += 1
        s.add(ScriptVersion(script_id=script.id, version=script.current_version, source=changes["source"],
                            created_at=now, author=author))
    script.updated_at = now
    return script


def delete_script(s: Session, script_id: int) -> None:
    script = get_script(s, script_id)
    if s.execute(select(Schedule.id).where(Schedule.script_id == script_id)).first():
        raise Conflict("Schedules use this script; delete or change them first.")
    if s.execute(select(Job.id).where(Job.script_id == script_id, Job.state == JOB_PENDING)).first():
        raise Conflict("Pending jobs use this script; cancel them first.")
    s.delete(script)


# -- schedules ----------------------------------------------------------------------------


def parse_rule(rule: str, timezone: str, start: datetime | None, now: datetime, min_interval_s: int) -> Any:
    """Parse and vet a rule as SPEC section 5 says (invalid_rule, never_fires, too_frequent)."""
    rec = recurrence.parse(rule, timezone, start=start, now=now)
    recurrence.ensure_fires(rec, now)
    recurrence.ensure_min_interval(rec, now, min_interval_s)
    return rec


def create_schedule(s: Session, rules: planning.Rules, fields: dict[str, Any], *, now: datetime,
                    min_interval_s: int) -> Schedule:
    get_script(s, fields["script_id"])
    quotas.check_schedules(s, quotas.of(s))
    rec = parse_rule(fields["rule"], fields["timezone"], fields.get("start"), now, min_interval_s)
    business = calendar_store.named(s, rec, fields.get("calendar"), fields.get("calendar_policy"), now)
    sch = Schedule(
        name=fields["name"], script_id=fields["script_id"], rule_text=fields["rule"], input_kind=rec.input_kind,
        timezone=rec.timezone, payload=dumps(fields.get("payload")),
        **calendar_store.schedule_fields(rec, business),
        enabled=fields["enabled"], priority=fields["priority"], version=1, created_at=now, updated_at=now,
        pause_after_failures=fields.get("pause_after_failures"),
        **{name: fields[name] for name in POLICY_FIELDS},
    )
    s.add(sch)
    s.flush()
    planning.replan_schedule(s, sch, now, rules)
    return sch


def get_schedule(s: Session, schedule_id: int) -> Schedule:
    sch = s.get(Schedule, schedule_id)
    if sch is None:
        raise NotFound(f"There is no schedule {schedule_id}.")
    return sch


def update_schedule(s: Session, rules: planning.Rules, schedule_id: int, changes: dict[str, Any], *,
                    now: datetime, min_interval_s: int) -> Schedule:
    """PATCH: a change of rule, time zone, start, enabled or priority replaces what is planned."""
    sch = get_schedule(s, schedule_id)
    if "script_id" in changes:
        get_script(s, changes["script_id"])
    if any(name in changes for name in RULE_FIELDS):
        _change_rule(s, sch, changes, now, min_interval_s)
    if "payload" in changes:
        sch.payload = dumps(changes["payload"])
    for name in ("name", "script_id", "pause_after_failures", *PLAN_FIELDS, *POLICY_FIELDS):
        if name in changes:
            setattr(sch, name, changes[name])
    sch.updated_at = now
    if any(name in changes for name in (*RULE_FIELDS, *PLAN_FIELDS)):
        sch.version += 1  # occurrences planned under the old version are dropped, wherever they are
        planning.replan_schedule(s, sch, now, rules)
    return sch


def _change_rule(s: Session, sch: Schedule, changes: dict[str, Any], now: datetime, min_interval_s: int) -> None:
    """A PATCH of the rule, its zone or start, or its calendar: the rule is parsed and vetted again."""
    rule = changes.get("rule", sch.rule_text)
    if any(name in changes for name in ("rule", "timezone", "start")):
        rec = parse_rule(rule, changes.get("timezone", sch.timezone), changes.get("start"), now, min_interval_s)
    else:  # only the calendar changed: the rule keeps its DTSTART, not re-anchored at now
        rec = recurrence.load(recurrence.business.detach(sch.rrule)[0], sch.input_kind)
    calendar = changes["calendar"] if "calendar" in changes else sch.calendar
    policy = changes["calendar_policy"] if "calendar_policy" in changes else (
        None if "calendar" in changes else sch.calendar_policy)
    business = calendar_store.named(s, rec, calendar, policy, now)
    sch.rule_text, sch.input_kind, sch.timezone = rule, rec.input_kind, rec.timezone
    for name, value in calendar_store.schedule_fields(rec, business).items():
        setattr(sch, name, value)


def set_enabled(s: Session, rules: planning.Rules, schedule_id: int, enabled: bool, now: datetime,
                note: str | None = None) -> Schedule:
    """Pause or resume; `note` (who and why) replaces the schedule's last pause note when given."""
    sch = get_schedule(s, schedule_id)
    if note is not None:
        sch.pause_note = note[:PAUSE_NOTE_MAX]
    if enabled:  # a resumed schedule counts its failures afresh
        sch.failures_in_row, sch.paused_reason = 0, None
    if sch.enabled != enabled:
        sch.enabled, sch.version, sch.updated_at = enabled, sch.version + 1, now
        planning.replan_schedule(s, sch, now, rules)  # resuming plans from now: a pause is not a misfire
    return sch


def delete_schedule(s: Session, schedule_id: int) -> None:
    sch = get_schedule(s, schedule_id)
    planning.unplan_schedule(s, sch.id)
    s.delete(sch)


PAUSED_TRIGGER = "The schedule is paused, so nothing of it runs; resume it first, or run its script from the script's page."


def trigger_schedule(s: Session, schedule_id: int, now: datetime) -> Schedule:
    """Plan one run now. Refused (Conflict) while paused: the claim drops a paused schedule's
    occurrences, so an accepted trigger would never run (docs/decisions/0141-paused-trigger.md)."""
    sch = get_schedule(s, schedule_id)
    if not sch.enabled:
        raise Conflict(PAUSED_TRIGGER)
    planning.trigger_now(s, sch, now)
    return sch


def next_times(sch: Schedule, now: datetime, count: int) -> list[datetime]:
    return [r.when for r in calendar_store.upcoming(sch, now, count) if r.when is not None]


def list_schedules(s: Session) -> list[Schedule]:
    return list(s.execute(select(Schedule).order_by(Schedule.id)).scalars())


# -- jobs ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class PutJob:
    """A job as `put_job` left it: the row's fields (what the API answers), without an ORM instance."""

    id: int
    key: str
    script_id: int
    run_at: datetime
    payload: str  # JSON text, as stored
    expire_after_s: int | None
    max_attempts: int
    priority: int
    state: str
    root_key: str
    depth: int
    created_by_run_id: int | None
    created_at: datetime
    updated_at: datetime


# The single PUT's statements, built once: SQLAlchemy Core caches their compilation by
# statement, so a PUT pays no ORM unit of work and no statement construction.
_J = cast(Table, Job.__table__)
# One round trip for what a PUT reads first: the job (locked; only what a replacement keeps or compares,
# every other field is the request's), whether its script exists, and, when the PUT adds a pending job
# (a new key, or one not pending), the pending jobs (`quotas.pending_jobs_used`) and the tenant's
# override of their quota (replacing a pending job is free, so it reads nothing).
_LOCKED = (select(_J.c.id, _J.c.state, _J.c.run_at, _J.c.created_at).where(_J.c.key == bindparam("key"))
           .with_for_update().subquery("job"))
_ADDS_PENDING = or_(_LOCKED.c.state.is_(None), _LOCKED.c.state != JOB_PENDING)


@lru_cache(maxsize=None)
def _first_read(dialect: str) -> Any:
    return select(
        _LOCKED.c.id, _LOCKED.c.state, _LOCKED.c.run_at, _LOCKED.c.created_at,
        select(Script.id).where(Script.id == bindparam("script_id")).scalar_subquery().label("script"),
        # On PostgreSQL counted under the tenant's pending-jobs lock (`quotas.pending_jobs_held`), taken
        # only by a PUT that adds a pending job and kept to the commit; SQLite's writers are serialised.
        case((_ADDS_PENDING, quotas.pending_jobs_held() if dialect == "postgresql"
              else quotas.pending_jobs_used(dialect)), else_=None).label("used"),
        select(quotas.TenantQuota.pending_jobs).where(quotas.TenantQuota.tenant_slug == bindparam("tenant"))
        .scalar_subquery().label("override"),
    ).select_from(select(literal(1).label("one")).subquery("one").outerjoin(_LOCKED, true()))


_INSERT_JOB = insert(_J).returning(_J.c.id)
_UPDATE_JOB = update(_J).where(_J.c.id == bindparam("b_id"))


def put_job(s: Session, key: str, fields: dict[str, Any], now: datetime) -> tuple[PutJob, bool]:
    """PUT /api/v1/jobs/{key} (SPEC section 8): create or replace; (the job, whether it is new).

    A new key creates a pending job; for a known key every field is replaced and, if `run_at`
    changed or the job was cancelled, the planned occurrence is replaced (the job is `done` if it
    already ran at that time); otherwise the planned occurrence takes the new priority. Core
    statements on the session's connection: one SELECT (the job locked, its script, the quota when it
    adds a pending job), the row, its occurrence through `planning`."""
    conn = s.connection()
    first = conn.execute(_first_read(conn.dialect.name), {"key": key, "script_id": fields["script_id"], "tenant": s.info["tenant"],
                                                   "tenant_key": quotas.lock_key(s.info["tenant"])}).one()
    existing = first if first.id is not None else None
    if first.script is None:
        raise NotFound(f"There is no script {fields['script_id']}.")
    if existing is None or existing.state != JOB_PENDING:  # a new pending job (replacing one is free)
        quotas.check_pending_jobs_read(first.used, first.override)
    values: dict[str, Any] = {name: fields.get(name) for name in JOB_FIELDS}
    values.update(payload=dumps(fields.get("payload")), root_key=key, depth=0, created_by_run_id=None, updated_at=now)
    if existing is None:
        values.update(key=key, state=JOB_PENDING, created_at=now)
        try:
            planned = _Planned(PutJob(id=conn.execute(_INSERT_JOB, values).scalar_one(), **values))
        except IntegrityError:
            raise Conflict(f"The job {key!r} was created by another request at the same time; retry.") from None
        planning.plan_jobs(s, [planned], now, fresh=True)
        return replace(planned.job, state=planned.state), True
    planned = _Planned(PutJob(id=existing.id, key=key, state=existing.state, created_at=existing.created_at, **values))
    if existing.run_at != values["run_at"] or existing.state == JOB_CANCELLED:
        planning.plan_jobs(s, [planned], now)  # sets its state: done if it ran at that time already
    else:
        planning.reprioritise_jobs(s, [planned])
    conn.execute(_UPDATE_JOB, {**values, "state": planned.state, "b_id": existing.id})
    return replace(planned.job, state=planned.state), False


class _Planned:
    """What `planning.plan_jobs` reads (id, run_at, priority) and writes (state) of one job."""

    def __init__(self, job: PutJob) -> None:
        self.job, self.id, self.run_at, self.priority, self.state = job, job.id, job.run_at, job.priority, job.state


def get_job(s: Session, key: str) -> Job:
    job = s.execute(select(Job).where(Job.key == key)).scalar_one_or_none()
    if job is None:
        raise NotFound(f"There is no job {key!r}.")
    return job


def cancel_job(s: Session, key: str, now: datetime) -> Job:
    job = get_job(s, key)
    planning.cancel_job(s, job, now)
    return job


_JOB_CURSOR = "j"  # each list's cursors carry its own letter (runs: "r"): one list refuses another's


def list_jobs(s: Session, *, state: str | None = None, root_key: str | None = None, limit: int = 50,
              cursor: str | None = None) -> tuple[list[Job], str | None]:
    """Newest first by creation (keyset pagination on id): replacing a job does not move it, so a
    walk through the pages meets each job once. `next_cursor` continues after the last item."""
    limit = max(1, min(limit, MAX_PAGE))
    query = select(Job).order_by(Job.id.desc()).limit(limit + 1)
    if state is not None:
        query = query.where(Job.state == state)
    if root_key is not None:
        query = query.where(Job.root_key == root_key)
    if cursor:
        query = query.where(Job.id < decode_cursor(cursor, _JOB_CURSOR))
    rows = list(s.execute(query).scalars())
    page = rows[:limit]
    return page, encode_cursor(page[-1].id, _JOB_CURSOR) if len(rows) > limit else None


def jobs_next_run_at(s: Session, job_ids: list[int]) -> dict[int, datetime]:
    """`job_next_run_at` of many jobs in one query; a job with nothing planned is absent."""
    if not job_ids:
        return {}
    rows = s.execute(select(Occurrence.job_id, func.min(Occurrence.scheduled_for)).where(
        Occurrence.job_id.in_(job_ids), Occurrence.status.in_((PLANNED, QUEUED, RUNNING)))
        .group_by(Occurrence.job_id))
    return {job_id: when for job_id, when in rows if job_id is not None}


LOOK_UP = object()  # `next_run_at` not known by the caller: ask the database


_NEXT_RUN = select(func.min(Occurrence.scheduled_for)).where(
    Occurrence.job_id == bindparam("job_id"), Occurrence.status.in_((PLANNED, QUEUED, RUNNING)))


def job_next_run_at(s: Session, job: Any) -> datetime | None:
    return s.connection().execute(_NEXT_RUN, {"job_id": job.id}).scalar()


# -- runs ---------------------------------------------------------------------------------


def encode_cursor(row_id: int, tag: str = "r") -> str:
    return base64.urlsafe_b64encode(f"{tag}{row_id}".encode()).decode().rstrip("=")


def decode_cursor(cursor: str, tag: str = "r") -> int:
    try:
        text = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        number = jsonsafe.parse_id(text[len(tag):]) if text.startswith(tag) else None
        if number is None:  # not ours, or past any id the store holds (PostgreSQL would refuse it)
            raise ValueError
        return number
    except ValueError:
        raise ValidationError("The cursor is not one this API gave out.", details={"field": "cursor"}) from None


def list_runs(s: Session, *, schedule_id: int | None = None, job_key: str | None = None, status: str | None = None,
              since: datetime | None = None, limit: int = 50, cursor: str | None = None) -> tuple[list[Run], str | None]:
    """Newest first; `next_cursor` continues after the last item (keyset pagination on id)."""
    query = select(Run).order_by(Run.id.desc()).limit(min(limit, MAX_PAGE) + 1)
    if schedule_id is not None:
        query = query.where(Run.schedule_id == schedule_id)
    if job_key is not None:
        query = query.where(Run.job_key == job_key)
    if status is not None:
        query = query.where(Run.status == status)
    if since is not None:
        query = query.where(Run.created_at >= since)
    if cursor:
        query = query.where(Run.id < decode_cursor(cursor))
    rows = list(s.execute(query).scalars())
    page = rows[: min(limit, MAX_PAGE)]
    more = len(rows) > len(page)
    return page, encode_cursor(page[-1].id) if more and page else None


def get_run(s: Session, run_id: int) -> Run:
    run = s.get(Run, run_id)
    if run is None:
        raise NotFound(f"There is no run {run_id}.")
    return run


# -- kv -----------------------------------------------------------------------------------


def kv_get(s: Session, key: str) -> KV:
    row = s.get(KV, key)
    if row is None:
        raise NotFound(f"There is no key {key!r}.")
    return row


def kv_put(s: Session, key: str, value: Any, now: datetime) -> KV:
    text = dumps(value)
    if len(text.encode()) > 64 * 1024:
        raise ValidationError("A value may be at most 64 KiB of JSON.", details={"field": "value"})
    quotas.hold(s, "kv")  # before the key's old size and the use are read
    row = s.get(KV, key)
    keys, size = quotas.kv_use(s)
    old = 0 if row is None else len(row.key.encode()) + len(row.value.encode())
    quotas.check_kv(quotas.of(s), keys + (row is None), size - old + len(key.encode()) + len(text.encode()))
    if row is None:
        row = KV(key=key, value=text, updated_at=now)
        s.add(row)
    else:
        row.value, row.updated_at = text, now
    return row


def kv_delete(s: Session, key: str) -> None:
    s.delete(kv_get(s, key))


KV_PAGE = 1000


def _kv_cursor(key: str) -> str:
    return base64.urlsafe_b64encode(("k" + key).encode()).decode().rstrip("=")


def _kv_after(cursor: str) -> str:
    try:
        text = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        if not text.startswith("k"):
            raise ValueError
        return jsonsafe.check_text(text[1:])  # a forged key with U+0000 is refused as the API's would be
    except ValueError:
        raise ValidationError("The cursor is not one this API gave out.", details={"field": "cursor"}) from None


def kv_list(s: Session, prefix: str, limit: int = KV_PAGE, cursor: str | None = None) -> tuple[list[KV], str | None]:
    """Keys starting with `prefix` in key order, a page of at most 1,000; `next_cursor` continues after it."""
    limit = max(1, min(limit, KV_PAGE))
    escaped = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    query = select(KV).where(KV.key.like(escaped + "%", escape="\\")).order_by(KV.key).limit(limit + 1)
    if cursor:
        query = query.where(KV.key > _kv_after(cursor))
    rows = list(s.execute(query).scalars())
    page = rows[:limit]
    return page, _kv_cursor(page[-1].key) if len(rows) > limit else None


