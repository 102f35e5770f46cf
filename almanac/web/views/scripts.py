"""Scripts (admin): list, upload or edit with line numbers, syntax errors at their line, run now, versions.

Saving goes through `service.create_script` / `update_script` (which check the
syntax with the sandbox), and run-now through the scripts API's own function,
so a page and a program see exactly the same behaviour. "Try draft" runs the text in
the editor, unsaved, as a trial through the one admission path (`run_now`, trigger `trial`).
"""

from __future__ import annotations

import functools
import hashlib
import json
import secrets
from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse, Response
from pydantic import ValidationError as PydanticError
from sqlalchemy import select
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import UploadFile

from almanac.errors import AlmanacError, NotFound
from almanac.platform.timer import admission
from almanac.platform.service import resources as service
from almanac.platform.timer import trial
from almanac.platform.store.models import Event, Script
from almanac.platform.runner import broken
from almanac.web import run_now
from almanac.web.api import scripts as scripts_api
from almanac.web.api.schemas_scheduler import SOURCE_MAX, RunNowIn, ScriptCheckIn, ScriptIn
from almanac.web.audit import audit
from almanac.web.errors import envelope
from almanac.web.views import script_extras as extras
from almanac.web.views.common import (
    SECURITY_HEADERS, PagePrincipal, ServicesDep, flash, is_htmx, page_router, payload_box, redirect, render, tenant_db,
    validation_message,
)

router = page_router(read="admin", write="admin")

STARTER = """export default async function (event) {
  console.log("payload", event.payload);
  return {ok: true};
}
"""


@router.get("/scripts")
def scripts_page(request: Request, principal: PagePrincipal, services: ServicesDep) -> Response:
    with tenant_db(services, principal) as session:
        scripts = list(session.execute(select(Script).order_by(Script.name)).scalars())
    return render(request, "scripts.html", scripts=scripts)


@router.get("/scripts/new")
def new_script_page(request: Request, principal: PagePrincipal, template: str | None = None) -> Response:
    chosen = extras.starter(template)
    values = _form_values(source=chosen.source if chosen else STARTER, name=chosen.slug if chosen else "")
    return _form_page(request, None, values, payload=chosen.payload if chosen else "{}", template=chosen)


def _form_page(request: Request, script: Script | None, values: dict[str, Any], status_code: int = 200,
               **context: Any) -> Response:
    """The script form with the editor's extras: completion table, reference panel, starter templates.

    The editor (CodeMirror) writes its styles into <style> elements; this page alone lets
    exactly those in, by a nonce made for this answer (EditorView.cspNonce), not 'unsafe-inline'.
    """
    nonce = secrets.token_urlsafe(16)
    response = render(request, "script_form.html", status_code=status_code, script=script, form=values,
                      starters=extras.STARTERS, reference=extras.api_table(), completion=extras.completion_json(),
                      style_nonce=nonce, **context)
    policy = SECURITY_HEADERS["Content-Security-Policy"]
    response.headers["Content-Security-Policy"] = policy.replace("style-src 'self'",
                                                                 f"style-src 'self' 'nonce-{nonce}'")
    return response


@router.post("/scripts/check")
async def check_source(request: Request, principal: PagePrincipal, services: ServicesDep) -> Response:
    """The editor's syntax check as one types: `{source}` in, the API's check answer out (JSON)."""
    try:
        body = ScriptCheckIn.model_validate_json(await request.body())
    except PydanticError as exc:
        return envelope(422, "validation_error", validation_message(exc))
    answer = scripts_api.check_answer(services.runner, body.source)
    return JSONResponse(answer.model_dump(), headers={"Cache-Control": "no-store"})


def _form_values(**given: Any) -> dict[str, Any]:
    return {"name": "", "source": "", "timeout_ms": "1000", "memory_mb": "32", **given}


async def _read_form(request: Request) -> dict[str, Any]:
    """Name, limits and source; an uploaded file, when one is given, replaces the textarea."""
    form = await request.form()
    values = _form_values(**{k: str(form.get(k, "")).strip() for k in ("name", "timeout_ms", "memory_mb")})
    values["source"] = str(form.get("source", "")).replace("\r\n", "\n")
    upload = form.get("source_file")
    if isinstance(upload, UploadFile) and upload.filename:
        data = await upload.read(SOURCE_MAX + 1)
        values["source"] = data.decode("utf-8", errors="replace").replace("\r\n", "\n")
    return values


def _validated(values: dict[str, Any]) -> ScriptIn:
    # Form fields are text: the API's model, without its strictness about types
    return ScriptIn.model_validate(dict(name=values["name"], source=values["source"],
                                        timeout_ms=values["timeout_ms"] or 1000, memory_mb=values["memory_mb"] or 32),
                                   strict=False)


def _refused(request: Request, script: Any, values: dict[str, Any], exc: Exception) -> Response:
    """The form again, with the reason in an alert and, for a syntax error, its line marked."""
    if isinstance(exc, PydanticError):
        return _form_page(request, script, values, 422, error=validation_message(exc))
    assert isinstance(exc, AlmanacError)
    details = exc.details or {}
    line, column = details.get("line"), details.get("column")
    where = f"Line {line}" + (f", column {column}" if column else "") + ": " if line else ""
    return _form_page(request, script, values, exc.status, error=where + exc.message, error_line=line,
                      error_message=exc.message)


@router.post("/scripts/new")
async def create_script(request: Request, principal: PagePrincipal, services: ServicesDep) -> Response:
    values = await _read_form(request)
    try:
        body = _validated(values)
        with tenant_db(services, principal) as session:
            script = service.create_script(session, services.runner, body.name, body.source, body.timeout_ms,
                                           body.memory_mb, services.clock.now(), principal.email)
            session.flush()
            script_id = script.id
            audit(session, "script.create", f"script {script_id}", body.model_dump(), request=request)
    except (PydanticError, AlmanacError) as exc:
        return _refused(request, None, values, exc)
    flash(request, f"Script “{body.name}” saved as version 1.")
    return redirect(f"/scripts/{script_id}")


def _load(services: ServicesDep, principal: PagePrincipal, script_id: int) -> tuple[Script, str]:
    with tenant_db(services, principal) as session:
        script = service.get_script(session, script_id)
        return script, service.script_source(session, script)


@router.get("/scripts/{script_id}")
def script_page(request: Request, script_id: int, principal: PagePrincipal, services: ServicesDep,
                template: str | None = None) -> Response:
    """The script in the editor; `?template=` puts a starter in the editor instead (saved only on Save)."""
    script, source = _load(services, principal, script_id)
    chosen = extras.starter(template)
    values = _form_values(name=script.name, source=chosen.source if chosen else source,
                          timeout_ms=str(script.timeout_ms), memory_mb=str(script.memory_mb))
    offered = chosen.payload if chosen else (extras.sample_payload(source) or "{}")
    return _form_page(request, script, values, payload=offered, template=chosen)


@router.post("/scripts/{script_id}")
async def update_script(request: Request, script_id: int, principal: PagePrincipal,
                        services: ServicesDep) -> Response:
    script, old_source = _load(services, principal, script_id)
    values = await _read_form(request)
    try:
        body = _validated(values)
        changes: dict[str, Any] = {"name": body.name, "timeout_ms": body.timeout_ms, "memory_mb": body.memory_mb}
        if body.source != old_source:
            changes["source"] = body.source  # only a changed source makes a new version
        with tenant_db(services, principal) as session:
            version = service.update_script(session, services.runner, script_id, changes,
                                            services.clock.now(), principal.email).current_version
            audit(session, "script.update", f"script {script_id}", {**changes, "version": version}, request=request)
    except (PydanticError, AlmanacError) as exc:
        return _refused(request, script, values, exc)
    flash(request, f"Saved; the current version is {version}.")
    return redirect(f"/scripts/{script_id}")


@router.post("/scripts/{script_id}/run")
async def run_script(request: Request, script_id: int, principal: PagePrincipal, services: ServicesDep) -> Response:
    """Run now and wait, as `POST /api/v1/scripts/{id}/run` does; show status, output, logs, duration."""
    form = await request.form()
    payload_text = str(form.get("payload", "")).strip()
    try:
        body = RunNowIn(payload=payload_box(payload_text))
    except (ValueError, PydanticError) as exc:
        return await run_in_threadpool(_run_answer, request, principal, services, script_id, payload_text,
                                       error=_not_json(exc))  # the page reads the database: not on the event loop
    run = await scripts_api.run_script(script_id, principal, services, request, body)
    emitted = await run_in_threadpool(_emitted, services, principal, run.id)
    return await run_in_threadpool(_run_answer, request, principal, services, script_id, payload_text, run=run,
                                   emitted=emitted)


def _not_json(exc: Exception) -> str:
    reason = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc).splitlines()[0]
    return f"Payload is not JSON: {reason}."


@router.post("/scripts/{script_id}/try")
async def try_draft(request: Request, script_id: int, principal: PagePrincipal, services: ServicesDep) -> Response:
    """Try draft: the source in the editor, unsaved, on the payload box's JSON. A trial through the one
    admission path (trigger `trial`, counted against the daily budgets, recorded): its effects are shown,
    never applied. A draft that does not parse is answered with its line and never admitted. Audited."""
    values = await _read_form(request)
    payload_text = str((await request.form()).get("payload", "")).strip()
    answer = functools.partial(_draft_answer, request, principal, services, script_id, values, payload_text)
    try:
        draft = ScriptCheckIn.model_validate({"source": values["source"]}).source  # the size limit of saving
        payload = RunNowIn(payload=payload_box(payload_text)).payload
    except PydanticError as exc:
        if any(e["loc"][:1] == ("source",) for e in exc.errors()):
            return await run_in_threadpool(answer, error="Source: " + validation_message(exc))
        return await run_in_threadpool(answer, error=_not_json(exc))
    except ValueError as exc:
        return await run_in_threadpool(answer, error=_not_json(exc))
    check = await run_in_threadpool(scripts_api.check_answer, services.runner, draft)
    if not check.ok:
        where = f"Line {check.line}" + (f", column {check.column}" if check.column else "") + ": " if check.line else ""
        return await run_in_threadpool(answer, error=f"The draft was not run. {where}{check.message}")
    digest = hashlib.sha256(draft.encode()).hexdigest()
    ran = await run_now.run_and_wait(
        request, services, principal.tenant_slug, script_id, payload, trigger=admission.TRIAL, source=draft,
        audit_entry=("script.try", f"script {script_id}", {"payload": payload, "source_sha256": digest,
                                                            "source_chars": len(draft)}))
    outcome = trial.trial_of(ran.admitted.result or broken(RuntimeError("the run was given up")))
    return await run_in_threadpool(answer, trial=outcome, run=ran.run)


def _draft_answer(request: Request, principal: PagePrincipal, services: ServicesDep, script_id: int,
                  values: dict[str, Any], payload: str, **result: Any) -> Response:
    """The trial's result panel (htmx), or the page again with the draft still in the editor."""
    status = 422 if "error" in result else 200
    if is_htmx(request):
        return render(request, "_trial_result.html", status_code=status, **result)
    script, _ = _load(services, principal, script_id)
    return _form_page(request, script, values, status, payload=payload, trial_result=result)


def _emitted(services: ServicesDep, principal: PagePrincipal, run_id: int) -> list[dict[str, Any]]:
    with tenant_db(services, principal) as session:
        return [{"id": e.id, "topic": e.topic, "data": e.data} for e in session.execute(
            select(Event).where(Event.run_id == run_id).order_by(Event.id)).scalars()]


def _run_answer(request: Request, principal: PagePrincipal, services: ServicesDep, script_id: int,
                payload: str, **result: Any) -> Response:
    status = 422 if "error" in result else 200
    if is_htmx(request):
        return render(request, "_run_result.html", status_code=status, **result)
    script, source = _load(services, principal, script_id)
    values = _form_values(name=script.name, source=source, timeout_ms=str(script.timeout_ms),
                          memory_mb=str(script.memory_mb))
    return _form_page(request, script, values, status, payload=payload, result=result)


@router.get("/scripts/{script_id}/versions")
def versions_page(request: Request, script_id: int, principal: PagePrincipal, services: ServicesDep,
                  v: int | None = None, a: int | None = None, b: int | None = None) -> Response:
    """Every version (who saved it, when); one shown (`v`), or two side by side (`a` and `b`)."""
    with tenant_db(services, principal) as session:
        script = service.get_script(session, script_id)
        versions = service.script_versions(session, script_id)
    by_number = {ver.version: ver for ver in versions}
    wanted = [n for n in (v, a, b) if n is not None]
    if any(n not in by_number for n in wanted):
        raise NotFound(f"Script {script.name} has no version {next(n for n in wanted if n not in by_number)}.")
    left = by_number[a] if a is not None and b is not None else None
    right = by_number[b] if a is not None and b is not None else None
    diff = extras.side_by_side(left.source, right.source) if left and right else None
    shown = None if diff is not None else by_number.get(v or script.current_version)
    return render(request, "script_versions.html", script=script, versions=versions, shown=shown, diff=diff,
                  left=left, right=right)


@router.post("/scripts/{script_id}/versions/{version}/restore")
def restore_version(request: Request, script_id: int, version: int, principal: PagePrincipal,
                    services: ServicesDep) -> Response:
    """An old version's source saved again, as a new version (history is never rewritten)."""
    with tenant_db(services, principal) as session:
        old = service.script_version(session, script_id, version)
        script = service.get_script(session, script_id)
        if version == script.current_version:
            flash(request, f"Version {version} is the current version already.", "bad")
            return redirect(f"/scripts/{script_id}/versions")
        new = service.update_script(session, services.runner, script_id, {"source": old.source},
                                    services.clock.now(), principal.email).current_version
        audit(session, "script.restore", f"script {script_id}", {"from_version": version, "version": new},
              request=request)
    flash(request, f"Version {version} restored as version {new}.")
    return redirect(f"/scripts/{script_id}")


@router.get("/scripts/{script_id}/delete")
def confirm_delete(request: Request, script_id: int, principal: PagePrincipal, services: ServicesDep) -> Response:
    script, _ = _load(services, principal, script_id)
    return render(request, "confirm.html", title=f"Delete script “{script.name}”?",
                  body="Its versions go with it. Scripts that schedules or pending jobs use cannot be deleted.",
                  action=f"/scripts/{script_id}/delete", back=f"/scripts/{script_id}", button="Delete script")


@router.post("/scripts/{script_id}/delete")
def delete_script(request: Request, script_id: int, principal: PagePrincipal, services: ServicesDep) -> Response:
    try:
        with tenant_db(services, principal) as session:
            service.delete_script(session, script_id)
            audit(session, "script.delete", f"script {script_id}", request=request)
    except AlmanacError as exc:
        if exc.status == 404:
            raise
        flash(request, exc.message, "bad")
        return redirect(f"/scripts/{script_id}")
    flash(request, "Script deleted.")
    return redirect("/scripts")
