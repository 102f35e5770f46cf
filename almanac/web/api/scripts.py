"""Scripts (SPEC section 6): admins upload and change them; everyone may read; run now."""

from __future__ import annotations


from fastapi import Request

from almanac.web.audit import audit
from almanac.platform.service import resources as service
from almanac.platform.store.models import ScriptVersion
from almanac.web.api.schemas_scheduler import (
    RunNowIn, RunOut, ScriptCheckIn, ScriptCheckOut, ScriptIn, ScriptOut, ScriptPatch, ScriptVersionOut,
)
from almanac.tenants.auth import Principal
from almanac.tenants.models import ApiToken
from almanac.web import run_now
from almanac.web.deps import CurrentPrincipal, ServicesDep, TenantSession, api_router
from almanac.platform.store.models import Script

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


    return [_out(session, s) for s in session.execute(select(Script).order_by(Script.id)).scalars()]


def author_of(principal: Principal, services: ServicesDep) -> str:
    """Who saves a version: the person's email, or the token's name."""
    if principal.email:
        return principal.email
    with services.db.shared_session() as shared:
        token = shared.get(ApiToken, principal.token_id) if principal.token_id else None
        return f"token {token.name}" if token is not None else "a token"


@router.post("", status_code=201)
def create_script(body: ScriptIn, session: TenantSession, services: ServicesDep,
                  principal: CurrentPrincipal) -> ScriptOut:
    script = service.create_script(session, services.runner, body.name, body.source, body.timeout_ms,
                                   body.memory_mb, services.clock.now(), author_of(principal, services))
    audit(session, "script.create", f"script {script.id}", body.model_dump())
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
def update_script(script_id: int, body: ScriptPatch, session: TenantSession, services: ServicesDep,
                  principal: CurrentPrincipal) -> ScriptOut:
    """A changed source becomes a new version; PUT an old version's source to restore it as a new one."""
    changes = body.model_dump(exclude_unset=True)
    script = service.update_script(session, services.runner, script_id, changes, services.clock.now(),
                                   author_of(principal, services))
    audit(session, "script.update", f"script {script_id}", {**changes, "version": script.current_version})
    return _out(session, script, with_source=True)


def version_out(version: ScriptVersion) -> ScriptVersionOut:
    return ScriptVersionOut(version=version.version, author=version.author, created_at=version.created_at,
                            source=version.source)


@router.get("/{script_id}/versions", summary="Every version of a script")
def list_versions(script_id: int, session: TenantSession) -> list[ScriptVersionOut]:
    """Newest first: each version's source, who saved it and when."""
    return [version_out(v) for v in service.script_versions(session, script_id)]


@router.get("/{script_id}/versions/{version}", summary="One version of a script")
def get_version(script_id: int, version: int, session: TenantSession) -> ScriptVersionOut:
    return version_out(service.script_version(session, script_id, version))


@router.delete("/{script_id}", status_code=204)
def delete_script(script_id: int, session: TenantSession) -> None:
    service.delete_script(session, script_id)
    audit(session, "script.delete", f"script {script_id}")


@router.post("/{script_id}/run", summary="Run a script now and wait for it")
async def run_script(script_id: int, principal: CurrentPrincipal, services: ServicesDep, request: Request,
                     body: RunNowIn | None = None) -> RunOut:
    """Runs now and waits: 200 with the run as `GET /runs/{id}` shows it, recorded with trigger `manual`.

    The run goes through the same admission as every run (the tenant's daily budgets, its fair share
    of the run slots): past a daily budget 429 `quota_exceeded` and nothing is recorded. A tenant may
    have a few of these waiting at once (`ALMANAC_RUN_NOW_WAITING_MAX`); past that 429 `rate_limited`
    with `Retry-After`."""
    payload = body.payload if body else None
    ran = await run_now.run_and_wait(request, services, principal.tenant_slug, script_id, payload,
                                     audit_entry=("script.run", f"script {script_id}", {"payload": payload}))
    return ran.run
