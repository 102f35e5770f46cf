"""Scripts (SPEC section 6): admins upload and change them; everyone may read; run now."""

from __future__ import annotations


from almanac.errors import NotFound
from almanac.platform import service
from almanac.web.api.schemas_scheduler import (
    RunNowIn, RunOut, ScriptCheckIn, ScriptCheckOut, ScriptIn, ScriptOut, ScriptPatch, run_out,
)
from almanac.web.deps import CurrentPrincipal, ServicesDep, TenantSession, api_router

router = api_router(prefix="/scripts", tags=["scripts"], read="viewer", write="admin")


def _out(session: TenantSession, script: object, with_source: bool = False) -> ScriptOut:
    return ScriptOut(
        id=script.id, name=script.name, version=script.current_version, timeout_ms=script.timeout_ms,
        memory_mb=script.memory_mb, created_at=script.created_at, updated_at=script.updated_at,
        source=service.script_source(session, script) if with_source else None,
    )


@router.get("")
def list_scripts(session: TenantSession) -> list[ScriptOut]:
    from sqlalchemy import select

    from almanac.platform.models import Script

    return [_out(session, s) for s in session.execute(select(Script).order_by(Script.id)).scalars()]


@router.post("", status_code=201)
def create_script(body: ScriptIn, session: TenantSession, services: ServicesDep) -> ScriptOut:
    script = service.create_script(session, services.runner, body.name, body.source, body.timeout_ms,
                                   body.memory_mb, services.clock.now())
    return _out(session, script, with_source=True)


@router.post("/check", summary="Check a script without saving it")
def check_script(body: ScriptCheckIn, services: ServicesDep) -> ScriptCheckOut:
    """Parses the source with the sandbox's own parser and checks that it has a default export,
    as saving does; answers 200 either way, with the first problem and its line and column."""
    return check_answer(services.runner, body.source)


def check_answer(runner: object, source: str) -> ScriptCheckOut:
    problem = service.source_problem(runner, source)
    if problem is None:
        return ScriptCheckOut(ok=True)
    message, line, column = problem
    return ScriptCheckOut(ok=False, message=message, line=line, column=column)


@router.get("/{script_id}")
def get_script(script_id: int, session: TenantSession) -> ScriptOut:
    return _out(session, service.get_script(session, script_id), with_source=True)


@router.put("/{script_id}")
def update_script(script_id: int, body: ScriptPatch, session: TenantSession, services: ServicesDep) -> ScriptOut:
    changes = body.model_dump(exclude_unset=True)
    script = service.update_script(session, services.runner, script_id, changes, services.clock.now())
    return _out(session, script, with_source=True)


@router.delete("/{script_id}", status_code=204)
def delete_script(script_id: int, session: TenantSession) -> None:
    service.delete_script(session, script_id)


@router.post("/{script_id}/run")
def run_script(script_id: int, principal: CurrentPrincipal, services: ServicesDep,
               body: RunNowIn | None = None) -> RunOut:
    """Runs now and waits. Uses short transactions of its own: none is held open while the script runs."""
    tenant, now = principal.tenant_slug, services.clock.now()
    with services.db.tenant_session(tenant) as session:
        service.get_script(session, script_id)
    claim = services.store.claim_manual(tenant, script_id, body.payload if body else None, now)
    services.scheduler.run_claim(claim)
    with services.db.tenant_session(tenant) as session:
        run = session.get(service.Run, claim.run_id)
        if run is None:  # pragma: no cover - the row was written above
            raise NotFound("The run vanished.")
        return run_out(run)
