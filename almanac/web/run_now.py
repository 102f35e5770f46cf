"""Run now and wait, for the API and the pages: admitted by `platform.admission`, awaited without a thread.

Every way a request starts a run (`POST /api/v1/scripts/{id}/run`, the script page's "Run now"
and "Try draft", a run page's "Run again", a schedule page's "Try with payload") comes here. The short database
work (the script, the admission's claim, the audit entry, reading the recorded run back) runs on
the thread pool; the wait for the run is an `await` on the admission's future, so a slow run
holds neither the event loop nor a request thread.

A tenant past its bound is refused by `RefuseFlood`, an ASGI layer in front of the app, before
FastAPI routes the request: a flood of refused calls then costs the event loop little more than
the refusals, and the health check and other tenants' requests do not queue behind them.
"""

from __future__ import annotations

import asyncio
import json
import re
from dataclasses import dataclass
from typing import Any

from fastapi import Request
from starlette.concurrency import run_in_threadpool

from almanac import jsonsafe
from almanac.errors import AlmanacError, RateLimited
from almanac.platform.service import resources as service
from almanac.platform.timer.admission import Admitted
from almanac.web.api.runs import with_links
from almanac.web.api.schemas_scheduler import RunNowIn, RunOut
from almanac.web.audit import audit
from almanac.web.errors import envelope
from almanac.web.fastput import _Replay

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


# A refusal here is answered after this pause. A client that calls again as soon as it is refused
# (ignoring `Retry-After`) cost the server a request each time, thousands a second from a few
# connections, and the other tenants' calls waited behind them in the event loop; paused, each such
# connection makes at most a few calls a second. Shorter than any `Retry-After` this answers with.
REFUSAL_PAUSE_S = 0.25
RUN_PATH = re.compile(r"/api/v1/scripts/([0-9]{1,18})/run")


class RefuseFlood:
    """ASGI layer: `POST /api/v1/scripts/{id}/run` from a tenant with no waiting place free is answered
    429 `rate_limited` (with `Retry-After`) here, as the route would answer it, without FastAPI.

    Only when the route would get as far as its own refusal: a cached token whose role may run scripts
    (the scripts router's write role), an id and a body the route accepts. Anything else, and every
    request of a tenant with room, goes on to the app untouched.
    """

    def __init__(self, app: Any, role: str) -> None:
        self.app, self.role = app, role

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "POST" or not RUN_PATH.fullmatch(scope["path"]):
            await self.app(scope, receive, send)
            return
        message = await receive()  # BodyLimit hands the whole body over in one message
        replay = _Replay(message, receive)
        refusal = self._refusal(scope, message)
        if refusal is None:
            await self.app(scope, replay, send)
            return
        await asyncio.sleep(REFUSAL_PAUSE_S)  # a coroutine asleep: no thread, no CPU
        await envelope(refusal.status, refusal.code, refusal.message, refusal.details)(scope, replay, send)

    def _refusal(self, scope: dict[str, Any], message: dict[str, Any]) -> AlmanacError | None:
        app = scope["app"]
        tokens = getattr(app.state, "token_cache", None)
        if (tokens is None or app.dependency_overrides or scope.get("root_path") or message.get("more_body")
                or message["type"] != "http.request" or not _accepted(message.get("body", b""))
                or jsonsafe.parse_id(RUN_PATH.fullmatch(scope["path"]).group(1)) is None):  # type: ignore[union-attr]
            return None
        headers = dict(scope["headers"])
        scheme, _, token = headers.get(b"authorization", b"").decode("latin-1").partition(" ")
        principal = tokens.get(token.strip()) if scheme.lower() == "bearer" and token.strip() else None
        if principal is None or not principal.has(self.role):
            return None
        try:
            app.state.services.admission.ensure_room(principal.tenant_slug)
        except RateLimited as exc:
            return exc
        return None


def _accepted(raw: bytes) -> bool:
    """The body is one the route takes (none, or a `RunNowIn` that `deps.safe_body` lets through)."""
    if not raw:
        return True
    try:
        value = json.loads(raw)
        jsonsafe.check(value, "the body")
        RunNowIn.model_validate(value)
    except (ValueError, RecursionError, jsonsafe.Unsafe):
        return False
    return True
