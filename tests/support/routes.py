"""Walk the app's routes (FastAPI keeps included routers nested; paths get their include prefix)."""

from __future__ import annotations

from typing import Any

from fastapi.routing import APIRoute


def api_routes(app: Any) -> list[tuple[str, APIRoute]]:
    """(full path, route) for every APIRoute of the app."""
    return list(_walk(app.routes, ""))


def _walk(routes: list[Any], prefix: str) -> Any:
    for route in routes:
        inner = getattr(route, "original_router", None)
        if inner is not None:
            context = getattr(route, "include_context", None)
            yield from _walk(inner.routes, prefix + (getattr(context, "prefix", "") or ""))
        elif isinstance(route, APIRoute):
            yield prefix + route.path, route
