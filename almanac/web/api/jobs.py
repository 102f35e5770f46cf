"""One-off jobs by key (SPEC section 8): PUT creates or replaces, DELETE cancels, GET lists or reads one."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import BackgroundTasks, Path, Query, Request, Response
from fastapi.concurrency import run_in_threadpool
from pydantic import AfterValidator

from almanac import jsonsafe
from almanac.platform.service import batch_writes as batch
from almanac.platform.service import job_create
from almanac.platform.service import resources as service
from almanac.platform.store.models import JOB_CANCELLED, JOB_DONE, JOB_PENDING
from almanac.web.api.schemas_batch import JobBatchIn, JobBatchOut, JobBatchResult
from almanac.web.api.schemas_scheduler import KEY_RULE, JobIn, JobOut, JobPage, job_key
from almanac.web.audit import TABLE as AUDIT_TABLE
from almanac.web.audit import audit, entry_row
from almanac.web.deps import CurrentPrincipal, ServicesDep, TenantSession, api_router

router = api_router(prefix="/jobs", tags=["jobs"], read="viewer", write="editor")
Key = Path(min_length=1, max_length=200)
JOB_STATES = (JOB_PENDING, JOB_DONE, JOB_CANCELLED)
# A PUT names a job that may not exist yet: its key must be one every route can address. GET and DELETE
# only look a key up, and every stored key stays reachable that a path can carry, so they take any `Key`.
NewKey = Annotated[str, Path(min_length=1, max_length=200, description=f"The job's key: {KEY_RULE}."),
                   AfterValidator(job_key)]


def _out(session: Any, job: Any, next_run_at: Any = service.LOOK_UP) -> JobOut:
    if next_run_at is service.LOOK_UP:
        next_run_at = service.job_next_run_at(session, job)
    return JobOut(
        key=job.key, script_id=job.script_id, run_at=job.run_at, payload=jsonsafe.loads_stored(job.payload),
        expire_after_s=job.expire_after_s, max_attempts=job.max_attempts, priority=job.priority, state=job.state,
        next_run_at=next_run_at, root_key=job.root_key, depth=job.depth,
        created_at=job.created_at, updated_at=job.updated_at,
    )


@router.get("")
def list_jobs(
    session: TenantSession,
    status: str | None = Query(default=None, pattern=f"^({'|'.join(JOB_STATES)})?$",
                               description="Only jobs in this state: `pending`, `done` or `cancelled`."),
    root_key: str | None = Query(default=None, max_length=200, description="Only the jobs of this chain."),
    limit: int = Query(default=50, ge=1, le=service.MAX_PAGE),
    cursor: str | None = Query(default=None, max_length=100),
) -> JobPage:
    """Newest first (by creation: a replaced job keeps its place), in pages with `next_cursor`."""
    # An empty parameter (SPEC's own `?status=&root_key=&cursor=`) filters nothing.
    rows, next_cursor = service.list_jobs(session, state=status or None, root_key=root_key or None, limit=limit,
                                          cursor=cursor)
    planned = service.jobs_next_run_at(session, [job.id for job in rows])
    return JobPage(items=[_out(session, job, planned.get(job.id)) for job in rows], next_cursor=next_cursor)


@router.post("/batch")
def put_jobs(body: JobBatchIn, session: TenantSession, principal: CurrentPrincipal, services: ServicesDep,
             background: BackgroundTasks) -> JobBatchOut:
    items = [item.model_dump() for item in body.jobs]
    outcomes = batch.upsert_jobs(session, items, services.clock.now())
    counts = {name: sum(1 for o in outcomes if o.outcome == name) for name in (batch.CREATED, batch.REPLACED)}
    # One entry for the batch (the audit log caps an entry's size): how many, and which keys.
    audit(session, "job.batch", f"{len(items)} jobs", {**counts, "keys": [o.key for o in outcomes[:50]]})
    services.wake_at_commit(session, background, principal.tenant_slug,
                            due_at=min((item["run_at"] for item in items), default=None))
    return JobBatchOut(items=[JobBatchResult(index=i, key=o.key, outcome=o.outcome, state=o.state)
                              for i, o in enumerate(outcomes)])


@router.put("/{key}", responses={201: {"description": "Created", "model": JobOut}})
async def put_job(body: JobIn, request: Request, principal: CurrentPrincipal, services: ServicesDep,
                  response: Response, key: NewKey) -> JobOut:
    # The hot path: the unit of work (what `TenantSession` would open and commit) runs in one
    # worker thread, not three (the dependency's start and end, and the route, each took one); this
    # process's wake-up runs in that thread too, once the commit is done (not in another after the answer).
    def work() -> tuple[JobOut, bool]:
        if not services.db.is_sqlite:  # a new key: one statement, not a transaction (platform/service/job_create.py)
            made = _create_at_once(body, request, principal, services, key)
            if made is not None:
                return made, True
        woken = BackgroundTasks()
        with services.db.tenant_session(principal.tenant_slug) as session:
            fields = body.model_dump()
            job, created = service.put_job(session, key, fields, services.clock.now())
            audit(session, "job.create" if created else "job.update", f"job {key}", fields, request=request,
                  at_once=True)
            services.wake_at_commit(session, woken, principal.tenant_slug, due_at=job.run_at)
            # A new pending job has one planned occurrence, at its run_at: no need to ask the database.
            fresh = job.run_at if created and job.state == JOB_PENDING else service.LOOK_UP
            out = _out(session, job, fresh)
        for task in woken.tasks:  # committed: wake this process's timer (a lock and a notify, not I/O)
            task.func(*task.args, **task.kwargs)
        return out, created

    out, created = await run_in_threadpool(work)
    response.status_code = 201 if created else 200
    return out


def _create_at_once(body: JobIn, request: Request, principal: Any, services: Any, key: str) -> JobOut | None:
    """`put_job`'s answer for a key that is new, made by one statement; None to take the transaction."""
    fields = body.model_dump()
    entry = entry_row(request, "job.create", f"job {key}", fields)
    stored = {**fields, "payload": service.dumps(fields.get("payload"))}
    job = job_create.create_job(services.db, principal.tenant_slug, key, stored, services.clock.now(),
                                companions=((AUDIT_TABLE, entry),), notify=services.notify_needed(body.run_at))
    if job is None:
        return None
    if services.scheduler is not None:  # committed: this process's timer, as `wake_at_commit` wakes it
        services.scheduler.wake(principal.tenant_slug)
    return _out(None, job, job.run_at)


@router.get("/{key}")
def get_job(session: TenantSession, key: str = Key) -> JobOut:
    return _out(session, service.get_job(session, key))


@router.delete("/{key}")
def cancel_job(session: TenantSession, services: ServicesDep, key: str = Key) -> JobOut:
    job = service.cancel_job(session, key, services.clock.now())
    audit(session, "job.cancel", f"job {key}")
    return _out(session, job)
