"""`PUT /api/v1/jobs/{key}` without FastAPI's per-request machinery (500 single PUTs a second).

A profile of the route showed about a third of a PUT's server CPU in FastAPI's dependency solving,
its route matching over every route of the app, and the exception and exit-stack layers; the work
itself (the endpoint) is the smaller part. This pure ASGI layer, inside `BodyLimit` (the body is
already limited and buffered), serves exactly that route in the common case by doing what FastAPI
would do, in the same order and with the same functions:

- the bearer token only from the `TokenCache` (its secret checked against the stored hash);
- the router's write role (`RoleGate`), `safe_body`'s `jsonsafe.check` of the JSON body, the path
  parameter's grammar (`job_key_problem`, as the route's `NewKey` checks it) and text (`safe_params`), and
  the body validated by the route's own body field (`JobIn`);
- the route's own endpoint (`api.jobs.put_job`, the same function: one unit of work, its audit
  entry, the wake-up at commit), answered through the route's response field as FastAPI serializes
  it; an `AlmanacError` becomes the envelope the app's handler would send.

Anything else (no cached token, another role, a body that is not JSON or not valid, another content
type, dependency overrides, an error before the endpoint) is passed on untouched to the app, which
answers it as always (and fills the token cache for the next request). The route itself stays
FastAPI's: it is the documented contract and the fallback. Tests compare both paths' answers.
"""

from __future__ import annotations

import json
from typing import Any

from fastapi import Request, Response

from almanac import jsonsafe
from almanac.errors import AlmanacError
from almanac.sandbox.capabilities import job_key_problem
from almanac.web.api import jobs
from almanac.web.deps import _bearer
from almanac.web.errors import envelope

PREFIX = "/api/v1/jobs/"


def _route() -> Any:
    """The PUT /jobs/{key} route of the jobs router: its body and response fields are FastAPI's own."""
    for route in jobs.router.routes:
        if getattr(route, "path", None) == "/jobs/{key}" and "PUT" in getattr(route, "methods", ()):
            return route
    raise RuntimeError("the jobs router has no PUT /jobs/{key}")


class FastPut:
    """ASGI layer: serves `PUT /api/v1/jobs/{key}` directly when nothing about the request is unusual."""

    def __init__(self, app: Any) -> None:
        self.app = app
        route = _route()
        self.body_field, self.response_field = route.body_field, route.response_field
        # The router's (read, write) roles, set by deps.api_router: a PUT needs the write role.
        gate: tuple[str, str] = jobs.router.role_gate  # type: ignore[attr-defined]
        self.role = gate[1]

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "PUT" or not scope["path"].startswith(PREFIX):
            await self.app(scope, receive, send)
            return
        message = await receive()  # BodyLimit hands the whole body over in one message
        replay = _Replay(message, receive)
        served = await self._serve(scope, message, replay, send)
        if not served:
            await self.app(scope, replay, send)

    async def _serve(self, scope: dict[str, Any], message: dict[str, Any], receive: Any, send: Any) -> bool:
        app = scope["app"]
        key = scope["path"][len(PREFIX):]
        if (not getattr(app.state, "fast_put", True) or app.dependency_overrides or scope.get("root_path")
                or job_key_problem(key) or message.get("more_body")
                or message["type"] != "http.request" or not _storable(key)):
            return False
        request = Request(scope, receive)
        if request.headers.get("content-type") != "application/json":
            return False
        body = self._body(message.get("body", b""))
        tokens = getattr(app.state, "token_cache", None)
        if body is None or tokens is None:
            return False
        try:
            principal = tokens.get(_bearer(request))
        except AlmanacError:
            return False
        if principal is None or not principal.has(self.role):
            return False
        request.state.principal = principal
        response = Response()
        try:
            out = await jobs.put_job(body, request, principal, app.state.services, response, key)
        except AlmanacError as exc:
            await envelope(exc.status, exc.code, exc.message, exc.details)(scope, receive, send)
            return True
        value, errors = self.response_field.validate(out, {}, loc=("response",))
        if errors:  # cannot happen (the endpoint builds a JobOut); FastAPI would raise, so do we
            raise RuntimeError(f"PUT /jobs/{{key}} answered an invalid body: {errors}")
        content = self.response_field.serialize_json(value, by_alias=True)
        answer = Response(content, status_code=response.status_code, media_type="application/json")
        await answer(scope, receive, send)
        return True

    def _body(self, raw: bytes) -> Any:
        """The validated `JobIn`, or None where FastAPI (or `safe_body`) would answer something else."""
        try:
            value = json.loads(raw)
            jsonsafe.check(value, "the body")
        except (ValueError, RecursionError, jsonsafe.Unsafe):
            return None
        if not isinstance(value, dict):
            return None
        body, errors = self.body_field.validate(value, {}, loc=("body",))
        return None if errors else body


def _storable(key: str) -> bool:
    """The key passes `deps.safe_params` (else the app answers the 422)."""
    try:
        jsonsafe.check_text(key)
    except jsonsafe.Unsafe:
        return False
    return True


class _Replay:
    """The request's first message again (read by this layer), then the server's own `receive`."""

    def __init__(self, first: dict[str, Any], receive: Any) -> None:
        self.first: dict[str, Any] | None = first
        self.receive = receive

    async def __call__(self) -> dict[str, Any]:
        if self.first is not None:
            message, self.first = self.first, None
            return message
        return await self.receive()
