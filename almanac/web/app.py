"""The FastAPI app factory: settings and services are built here, never at import time."""

from __future__ import annotations

import importlib
import logging
import pkgutil
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI
from uvicorn.middleware.proxy_headers import ProxyHeadersMiddleware

from almanac import __version__
from almanac.settings import Settings, get_settings
from almanac.web import docs, errors, openapi, ops
from almanac.web.bodylimit import BodyLimit
from almanac.web.api import scripts as scripts_api
from almanac.web.fastput import FastPut
from almanac.web.run_now import RefuseFlood
from almanac.web.token_cache import TokenCache
from almanac.worker import Services, build_services
import almanac.web.api as api_package

log = logging.getLogger("almanac.web")
API_PREFIX = "/api/v1"


def _api_routers() -> list[Any]:
    """Every module of almanac.web.api that defines `router`, in name order."""
    routers = []
    for info in sorted(pkgutil.iter_modules(api_package.__path__), key=lambda i: i.name):
        module = importlib.import_module(f"{api_package.__name__}.{info.name}")
        if hasattr(module, "router"):
            routers.append(module.router)
    return routers


def _views() -> Any:
    """The browser UI package: `setup(app, services)` mounts its pages, `page_error` renders errors as pages."""
    return importlib.import_module("almanac.web.views")


def create_app(
    settings: Settings | None = None, *, services: Services | None = None, run_scheduler: bool = False
) -> FastAPI:
    settings = settings or get_settings()
    services = services or build_services(settings)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        running: Services = app.state.services  # the one place the app's services live
        if run_scheduler and running.scheduler is not None:
            running.scheduler.start()
        elif hasattr(running.scheduler, "start_serving"):  # run now and trials still run here
            running.scheduler.start_serving()
        try:
            yield
        finally:
            running.close()

    app = FastAPI(title="Almanac", version=__version__, lifespan=lifespan, docs_url=None, redoc_url=None)
    # Added first, so it runs inside BodyLimit (bodies already limited): serves the common single PUT
    # of a job without FastAPI's dependency solving and routing; all else passes through.
    app.add_middleware(FastPut)
    # Inside BodyLimit too: a tenant's run-now calls past its waiting bound are refused before routing.
    app.add_middleware(RefuseFlood, role=scripts_api.router.role_gate[1])  # type: ignore[attr-defined]
    app.add_middleware(BodyLimit)  # 413 for bodies over 1 MiB, before they are read whole
    docs.install(app, settings.guide_dir)  # /docs and /redoc from packaged assets (no CDN), /guide
    # Everything that serves a request reads its services here (dependencies, the session middleware,
    # the lifespan), never from a closure: one app, one place to look.
    app.state.services = services
    app.state.settings = settings
    app.state.token_cache = TokenCache(settings.token_cache_s)
    app.state.fast_put = True  # False sends every PUT of a job through FastAPI (tests compare the two)
    views = _views()
    errors.install(app, getattr(views, "page_error", None))
    app.include_router(ops.router)
    for router in _api_routers():
        app.include_router(router, prefix=API_PREFIX)
    if hasattr(views, "setup"):
        views.setup(app, services)
    openapi.install(app)  # error statuses and the bearer scheme, with each operation's summary and description
    if settings.trusted_proxies:
        # Added last, so it runs first: everything after it (the audit log, the sign-in throttle) sees
        # the client a named proxy vouched for. Here rather than in uvicorn, so that the app behaves
        # the same under any server; `almanac serve` turns uvicorn's own handling off.
        app.add_middleware(ProxyHeadersMiddleware, trusted_hosts=settings.trusted_proxy_list())
    return app
