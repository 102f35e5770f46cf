"""What every page shares: templates, the session, CSRF, and the one page gate.

`page_router()` attaches `PageGate` to a router, as `api_router()` does with
`RoleGate` for the API: reads need the router's `read` role, writes its
`write` role, and every write must carry the session's CSRF token. A test
walks the app and checks that every page route carries the gate, so no
route can forget it.

The session is kept on the server (`session_store`); the cookie holds only its
random id. It holds the user id, the chosen tenant's slug and the CSRF token.
"""

from __future__ import annotations

import hmac
import json
import secrets
from datetime import datetime, timezone, tzinfo
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import quote, unquote
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.templating import Jinja2Templates
from jinja2 import pass_context
from markupsafe import Markup
from starlette.datastructures import FormData
from starlette.concurrency import run_in_threadpool

from almanac import jsonsafe
from almanac.errors import Forbidden, Unauthorized, ValidationError
from almanac.tenants.auth import Principal, principal_for_member
from almanac.tenants.models import ROLES
from almanac.web.deps import safe_params, valid_ids
from almanac.web.views import run_detail
from almanac.worker import Services
from almanac.web.views.session_store import rotate

READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
CSRF_FIELD = "csrf_token"
CSRF_HEADER = "x-csrf-token"
# Session keys: who, which tenant, and the synchronizer token for forms.
USER_KEY, TENANT_KEY, CSRF_KEY, FLASH_KEY = "uid", "tenant", "csrf", "flash"
# Pages only load our own files: no inline script, no third-party origin, no framing.
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "form-action 'self'; frame-ancestors 'none'; base-uri 'none'; object-src 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "X-Frame-Options": "DENY",
}

templates = Jinja2Templates(directory=str(Path(__file__).resolve().parent.parent / "templates"))


# -- time -------------------------------------------------------------------------


def viewer_zone(request: Request) -> ZoneInfo:
    """The browser's time zone, which static/app.js keeps in the `tz` cookie; UTC until it has."""
    name = unquote(request.cookies.get("tz", ""))  # app.js percent-encodes the slash
    try:
        return ZoneInfo(name) if name else ZoneInfo("UTC")
    except (ZoneInfoNotFoundError, ValueError):
        return ZoneInfo("UTC")


def format_when(value: datetime | None, zone: ZoneInfo | str | None = None) -> str:
    """A time to the second in `zone` (UTC by default), e.g. "Mon 2026-11-23 08:00:05 CET"."""
    if value is None:
        return "—"
    local = _local(value, zone)
    return local.strftime("%a %Y-%m-%d %H:%M:%S") + f" {local.tzname()}"


def format_precise(value: datetime, zone: ZoneInfo | str | None = None) -> str:
    """The same time to the millisecond, for the hover title."""
    local = _local(value, zone)
    return local.strftime("%Y-%m-%d %H:%M:%S.") + f"{local.microsecond // 1000:03d} {local.tzname()}"


def _local(value: datetime, zone: tzinfo | str | None) -> datetime:
    if value.tzinfo is None:
        value = value.replace(tzinfo=timezone.utc)
    zone = ZoneInfo(zone) if isinstance(zone, str) else zone
    return value.astimezone(zone or timezone.utc)


def time_element(value: datetime | None, zone: ZoneInfo | str | None = None,
                 also: ZoneInfo | str | None = None) -> Markup:
    """`<time>` showing the second in `zone`; its title holds the millisecond (and the time in `also`)."""
    if value is None:
        return Markup("—")
    title = format_precise(value, zone)
    if also is not None and str(also) != str(zone):
        title += " · " + format_precise(value, also)
    iso = _local(value, timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    return Markup('<time datetime="{}" title="{}">{}</time>').format(iso, title, format_when(value, zone))


def _when_filter(context: Any, value: datetime | None, zone: ZoneInfo | str | None = None,
                 also: ZoneInfo | str | None = None) -> Markup:
    """`{{ t|when }}` in the viewer's zone; `{{ t|when(rule_zone) }}` in another, the viewer's on hover."""
    viewer = context.get("viewer_tz")
    if zone is None:
        return time_element(value, viewer, also)
    return time_element(value, zone, also or viewer)


def _when_text_filter(context: Any, value: datetime | None, zone: ZoneInfo | str | None = None) -> str:
    return format_when(value, zone or context.get("viewer_tz"))


def _segment_filter(value: Any) -> str:
    """`{{ job.key|segment }}`: a name as one path segment of a link or form. Jinja's `urlencode` keeps
    '/', so a key "x/../victim" would lead to another job's page, or post to its Cancel."""
    return quote(str(value), safe="")


templates.env.filters["when"] = pass_context(_when_filter)
templates.env.filters["when_text"] = pass_context(_when_text_filter)
templates.env.filters["segment"] = _segment_filter
# A run (row or API shape) -> its start lag as text: `{{ run|lag }}`.
templates.env.filters["lag"] = lambda run: run_detail.lag_text(run_detail.start_lag_ms(run.scheduled_for,
                                                                                       run.started_at))


# -- session and CSRF ---------------------------------------------------------------


def csrf_token(request: Request) -> str:
    """The session's synchronizer token, made on first use (also before sign-in, for the login form)."""
    token = request.session.get(CSRF_KEY)
    if not token:
        token = request.session[CSRF_KEY] = secrets.token_urlsafe(32)
    return token


async def check_csrf(request: Request) -> None:
    """Refuse a write whose token (header for htmx, form field otherwise) is not the session's."""
    expected = request.session.get(CSRF_KEY)
    sent = request.headers.get(CSRF_HEADER)
    form = await _form(request)
    if sent is None and form is not None:
        value = form.get(CSRF_FIELD)
        sent = value if isinstance(value, str) else None
    if not expected or not sent or not hmac.compare_digest(str(expected), sent):
        raise Forbidden("This form has expired or did not come from this site; reload the page and try again.")
    for name, value in form.multi_items() if form is not None else ():
        if isinstance(value, str):  # form text follows the API's rule for text (jsonsafe: no U+0000)
            try:
                jsonsafe.check_text(value, f"The field {name[:40]}")
            except jsonsafe.Unsafe as exc:
                raise ValidationError(f"{exc}.") from None


async def _form(request: Request) -> FormData | None:
    """The request's form, if it sends one. Its bytes are read first: Starlette keeps them, so the form and a
    route that reads the body itself (as JSON, say) both read them, where parsing the form alone would use up
    the stream and leave that route a server error."""
    if not request.headers.get("content-type", "").startswith(
            ("application/x-www-form-urlencoded", "multipart/form-data")):
        return None
    try:
        await request.body()
    except RuntimeError:  # a route with form fields: FastAPI has parsed (and kept) the form already
        pass
    return await request.form()  # Starlette caches it, so the route still reads the same form


def start_session(request: Request, user_id: int, tenant_slug: str | None) -> None:
    """A fresh session at sign-in: nothing from before survives, the id and the CSRF token are new."""
    rotate(request)
    request.session.clear()
    request.session[USER_KEY] = user_id
    if tenant_slug:
        request.session[TENANT_KEY] = tenant_slug
    request.session[CSRF_KEY] = secrets.token_urlsafe(32)


def payload_box(text: str) -> Any:
    """A page's payload box as JSON (ValueError when it is not): an empty box is `{}`, as a new
    schedule's payload, so that `event.payload.x` is undefined rather than a TypeError on null."""
    text = text.strip()
    try:
        return json.loads(text) if text else {}
    except RecursionError:
        raise ValueError("it is nested too deeply") from None


def flash(request: Request, message: str, kind: str = "ok") -> None:
    """A one-line notice shown on the next page rendered (after a redirect)."""
    request.session.setdefault(FLASH_KEY, []).append([kind, message])
    request.session[FLASH_KEY] = request.session[FLASH_KEY]  # mark the session modified


def get_services(request: Request) -> Services:
    return request.app.state.services


def session_principal(request: Request, services: Services) -> Principal:
    """The signed-in person in the chosen tenant; the membership is read again on every request."""
    user_id, slug = request.session.get(USER_KEY), request.session.get(TENANT_KEY)
    if not user_id:
        raise Unauthorized("Sign in to see this page.")
    if not slug:
        raise Unauthorized("Choose a tenant first.")  # page_error sends this to /tenants
    with services.db.shared_session() as session:
        try:
            return principal_for_member(session, int(user_id), str(slug))
        except Unauthorized:
            # Removed from the tenant since signing in: forget the choice, keep nothing stale.
            request.session.pop(TENANT_KEY, None)
            raise


# -- the gate ---------------------------------------------------------------------


class PageGate:
    """The one check of every page route: signed in, CSRF on writes, role for the method.

    `read=None` marks pages anyone may see (sign-in); their writes still need the CSRF token.
    """

    def __init__(self, read: str | None = "viewer", write: str | None = "editor") -> None:
        assert read is None or read in ROLES
        assert write is None or write in ROLES
        self.read, self.write = read, write

    async def __call__(self, request: Request) -> Principal | None:
        is_write = request.method not in READ_METHODS
        needed = self.write if is_write else self.read
        principal = None
        if needed is not None:
            # A database read: on the thread pool, never in the event loop every request shares.
            principal = await run_in_threadpool(session_principal, request, get_services(request))
            request.state.principal = principal
        if is_write:
            await check_csrf(request)
        if principal is not None and needed is not None and not principal.has(needed):
            raise Forbidden(f"This needs the {needed} role; you are {_article(principal.role)} {principal.role}.")
        return principal


def _article(word: str) -> str:
    return "an" if word[:1] in "aeiou" else "a"


def page_router(*, read: str | None = "viewer", write: str | None = "editor") -> APIRouter:
    # valid_ids: an id that is not a valid id at all (not digits, past the store's largest) is a 404 page, and
    # safe_params: text the store cannot hold in the path or query is a 422 page, as in the API.
    gates = [Depends(PageGate(read, write)), Depends(valid_ids), Depends(safe_params)]
    router = APIRouter(dependencies=gates, include_in_schema=False)
    router.page_gate = (read, write)  # type: ignore[attr-defined]  (read by the route meta-test)
    return router


def current_principal(request: Request) -> Principal:
    """The principal the gate found (the gate runs first, as a router dependency)."""
    principal = getattr(request.state, "principal", None)
    if principal is None:
        raise Unauthorized("Sign in to see this page.")
    return principal


PagePrincipal = Annotated[Principal, Depends(current_principal)]
ServicesDep = Annotated[Services, Depends(get_services)]


# -- responses ----------------------------------------------------------------------


def render(request: Request, template: str, /, status_code: int = 200, **context: Any) -> HTMLResponse:
    principal = getattr(request.state, "principal", None)
    base = {
        "principal": principal,
        "csrf_token": csrf_token(request),
        "viewer_tz": viewer_zone(request),
        "flashes": request.session.pop(FLASH_KEY, []) if not is_htmx(request) else [],
        "nav": _nav(principal),
        "path": request.url.path,
    }
    response = templates.TemplateResponse(request, template, {**base, **context}, status_code=status_code)
    response.headers.update(SECURITY_HEADERS)
    return response


def _nav(principal: Principal | None) -> list[tuple[str, str]]:
    if principal is None:
        return []
    items = [("/", "Dashboard"), ("/schedules", "Schedules"), ("/jobs", "Jobs"), ("/runs", "Runs"), ("/calendar", "Calendar"), ("/kv", "Data")]
    if principal.has("admin"):
        items += [("/scripts", "Scripts"), ("/tokens", "Tokens"), ("/members", "Members"), ("/egress", "Egress"),
                  ("/secrets", "Secrets"), ("/quotas", "Quotas"), ("/audit", "Audit")]
    return items + [("/guide", "Guide"), ("/docs", "API")]


def redirect(url: str, request: Request | None = None) -> Response:
    """After a write: 303 so the browser GETs the next page (htmx gets HX-Redirect instead)."""
    if request is not None and is_htmx(request):
        return Response(status_code=204, headers={"HX-Redirect": url})
    return RedirectResponse(url, status_code=303)


def is_htmx(request: Request) -> bool:
    return request.headers.get("hx-request") == "true"


# -- helpers for resource pages ---------------------------------------------------------


def tenant_db(services: Services, principal: Principal) -> Any:
    """One unit of work in the principal's own tenant schema (commits on leaving the block)."""
    return services.db.tenant_session(principal.tenant_slug)


def validation_message(error: Any) -> str:
    """A pydantic ValidationError as one sentence naming the field, for a form's alert."""
    first = error.errors()[0] if error.errors() else {}
    where = ".".join(str(part) for part in first.get("loc", ()) if part != "body") or "form"
    return f"{where.replace('_', ' ').capitalize()}: {first.get('msg', 'is invalid')}."
