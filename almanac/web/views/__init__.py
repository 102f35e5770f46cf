"""The browser UI: server-rendered pages (Jinja2) with htmx partials, no build step.

`create_app` calls `setup(app, services)` to mount the session, the static
files and the page routers, and hands `page_error` to the error handlers so
that an error on a page path answers as a page (or a redirect to sign in).
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any
from urllib.parse import quote

from fastapi import FastAPI, Request
from fastapi.responses import Response
from fastapi.staticfiles import StaticFiles

from almanac.web.views.session_store import ServerSessionMiddleware
from almanac.web.views.common import TENANT_KEY, USER_KEY, is_htmx, redirect, render

STATIC_DIR = Path(__file__).resolve().parent.parent / "static"
# One module a resource; each defines `router` (a page_router), mounted in this order.
PAGE_MODULES = ("auth", "dashboard", "rules", "scripts", "schedules", "jobs", "runs", "admin", "quotas", "delivery",
                "outbound", "kv", "calendar", "business_calendars")
SESSION_COOKIE = "almanac_session"
# A working day: long enough not to nag, short enough that a forgotten browser signs out.
SESSION_MAX_AGE_S = 12 * 3600


def setup(app: FastAPI, services: Any) -> None:
    settings = services.settings
    app.add_middleware(
        ServerSessionMiddleware,
        cookie=SESSION_COOKIE,
        max_age=SESSION_MAX_AGE_S,
        # Plain http on 127.0.0.1 is the default deployment; an operator behind TLS turns this on.
        https_only=bool(getattr(settings, "secure_cookies", False)),
    )
    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")
    for name in PAGE_MODULES:
        module = _page_module(name)
        if module is not None:
            app.include_router(module.router)


def _page_module(name: str) -> Any:
    try:
        return importlib.import_module(f"{__name__}.{name}")
    except ModuleNotFoundError as missing:
        # A resource whose page module is not written yet is simply absent, not an import error.
        if missing.name == f"{__name__}.{name}":
            return None
        raise


async def page_error(request: Request, status: int, code: str, message: str) -> Response | None:
    """Errors on page paths: 401 sends the person to sign in (or to choose a tenant); others are pages."""
    if status == 401:
        signed_in = USER_KEY in request.session
        if signed_in and TENANT_KEY not in request.session:
            return redirect("/tenants", request)
        if not signed_in:
            target = request.url.path
            if request.url.query:
                target += "?" + request.url.query
            wanted = "" if target == "/" or request.method != "GET" else "?next=" + quote(target, safe="")
            return redirect("/login" + wanted, request)
    template = "_alert.html" if is_htmx(request) else "error.html"
    return render(request, template, status_code=status, status=status, code=code, message=message)
