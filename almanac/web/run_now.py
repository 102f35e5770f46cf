"""Run now and wait, for the API and the pages: admitted by `platform.admission`, awaited without a thread.

Every way a request starts a run (`POST /api/v1/scripts/{id}/run`, the script page's "Run now"
and "Try draft", a run page's "Run again", a schedule page's "Try with payload") comes here. The short database
work (the script, the admission's claim, the audit entry, reading the recorded run back) runs on
the thread pool; the wait for the run is an `await` on the admission's future, so a slow run
holds neither the event loop nor a request thread.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from fastapi import Request
from starlette.concurrency import run_in_threadpool

from almanac.platform.service import resources as service
from almanac.platform.timer.admission import Admitted
from almanac.web.api.runs import with_links
from almanac.web.api.schemas_scheduler import RunOut
from almanac.web.audit import audit

# Past the script's timeout and its lease margin, a run is recorded by whoever takes it over;
# the request then answers with the run as it stands rather than wait on.
WAIT_SLACK_S = 10.0


@dataclass(frozen=True)
class Ran:
    """A run started by a request, as recorded (`run`, with its events' ids), and its full result
    (`admitted.result`: a trial's effects, which were not applied)."""

    run: RunOut
    admitted: Admitted


async def run_and_wait(request: Request, services: Any, tenant: str, script_id: int, payload: Any, *,
                       audit_entry: tuple[str, str, Any], trigger: str = "manual",
                       event_extra: dict[str, Any] | None = None, source: str | None = None) -> Ran:
    """Admit a run of the script (404, 429 `rate_limited` or `quota_exceeded`), wait for its record, read it.

    `source`: a trial's draft, run in place of the saved version (`Admission.admit`)."""
    admission = services.admission
    admission.ensure_room(tenant)  # a flood past the bound is refused here, before any thread or database work
    admitted, place = await run_in_threadpool(
        _admit, request, services, tenant, script_id, payload, audit_entry, trigger, event_extra, source)
    try:
        limit = admitted.claim.timeout_ms / 1000 + services.settings.lease_margin_s + WAIT_SLACK_S
        try:
            await asyncio.wait_for(asyncio.shield(asyncio.wrap_future(admitted.done)), limit)
        except asyncio.TimeoutError:
            pass  # answered as it stands (running); its lease ends it
    finally:
        admission.leave(tenant, place)
    run = await run_in_threadpool(_read_run, services, tenant, admitted.claim.run_id)
    return Ran(run, admitted)


def _admit(request: Request, services: Any, tenant: str, script_id: int, payload: Any,
           audit_entry: tuple[str, str, Any], trigger: str, event_extra: dict[str, Any] | None,
           source: str | None) -> tuple[Admitted, float]:
    with services.db.tenant_session(tenant, read_only=True) as session:
        timeout_ms = service.get_script(session, script_id).timeout_ms
    place = services.admission.hold(tenant, timeout_ms)
    try:
        admitted = services.admission.admit(tenant, script_id, payload, services.clock.now(), trigger=trigger,
                                            event_extra=event_extra, source=source)
    except BaseException:
        services.admission.leave(tenant, place)
        raise
    with services.db.tenant_session(tenant) as session:
        action, target, changes = audit_entry
        audit(session, action, target, changes, request=request)
    return admitted, place


def _read_run(services: Any, tenant: str, run_id: int) -> RunOut:
    with services.db.tenant_session(tenant, read_only=True) as session:
        return with_links(session, [service.get_run(session, run_id)])[0]
