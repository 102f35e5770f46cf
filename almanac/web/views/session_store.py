"""The session middleware: `request.session` is a dict kept on the server, the cookie only its id.

Drop-in for Starlette's SessionMiddleware (the pages use `request.session` as before), with
three differences: the data lives in `web_sessions` (almanac.tenants.sessions), an emptied
session is deleted on the server (sign-out ends it for every copy of the cookie), and
`rotate(request)` gives the session a new id (at sign-in, against fixation).
"""

from __future__ import annotations

import json
from http.cookies import SimpleCookie
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.datastructures import MutableHeaders
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from almanac.tenants import sessions

ROTATE_KEY = "almanac.session_rotate"
ID_HASH_KEY = "almanac.session_id_hash"
# API requests authenticate by token, static files need nothing: neither touches the session table.
_SKIP_PREFIXES = ("/api/",)
_NO_STORE_PREFIXES = ("/static/",)


def rotate(request: Request) -> None:
    """Give the session a new id when the response is sent (the old id stops working)."""
    request.scope[ROTATE_KEY] = True


def current_id_hash(request: Request) -> str | None:
    """The stored key of the asking session (to keep it when ending a person's other sessions)."""
    return request.scope.get(ID_HASH_KEY)


class ServerSessionMiddleware:
    def __init__(self, app: ASGIApp, *, cookie: str, max_age: int, https_only: bool) -> None:
        self.app, self.cookie = app, cookie
        self.max_age, self.https_only = max_age, https_only

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if scope["type"] != "http" or path.startswith(_SKIP_PREFIXES):
            await self.app(scope, receive, send)
            return
        if path.startswith(_NO_STORE_PREFIXES):
            scope["session"] = {}
            await self.app(scope, receive, send)
            return
        services = scope["app"].state.services  # the app's one place for them (see web.app)
        token = _cookie_value(scope, self.cookie)
        loaded = await run_in_threadpool(self._load, services, token) if token else None
        scope["session"] = dict(loaded.data) if loaded else {}
        scope[ID_HASH_KEY] = loaded.id_hash if loaded else None
        before = _dump(scope["session"])

        async def send_wrapper(message: Message) -> None:
            if message["type"] == "http.response.start":
                cookie = await run_in_threadpool(self._store, services, scope, loaded, before, token is not None)
                if cookie is not None:
                    MutableHeaders(scope=message).append("set-cookie", cookie)
            await send(message)

        await self.app(scope, receive, send_wrapper)

    def _load(self, services: Any, token: str) -> sessions.Loaded | None:
        with services.db.shared_session() as db:
            return sessions.load(db, token, now=services.clock.now())

    def _store(self, services: Any, scope: Scope, loaded: sessions.Loaded | None, before: str, had_cookie: bool) -> str | None:
        """Write what changed; returns the Set-Cookie value to send, if any."""
        data, rotate_now = scope["session"], scope.get(ROTATE_KEY, False)
        if _dump(data) == before and not rotate_now:
            return None
        now = services.clock.now()
        with services.db.shared_session() as db:
            if not data:
                if loaded is not None:
                    sessions.end(db, loaded.id_hash)
                return self._set_cookie("", 0) if had_cookie else None
            if loaded is not None and not rotate_now:
                sessions.save(db, loaded.id_hash, data, now=now)
                return None
            if loaded is not None:
                sessions.end(db, loaded.id_hash)
            return self._set_cookie(sessions.create(db, data, now=now), self.max_age)

    def _set_cookie(self, value: str, max_age: int) -> str:
        parts = [f"{self.cookie}={value}", "path=/", f"Max-Age={max_age}", "httponly", "samesite=lax"]
        if self.https_only:
            parts.append("secure")
        return "; ".join(parts)


def _cookie_value(scope: Scope, name: str) -> str | None:
    for key, value in scope.get("headers", ()):
        if key == b"cookie":
            jar: SimpleCookie = SimpleCookie()
            try:
                jar.load(value.decode("latin-1"))
            except Exception:  # noqa: BLE001 - a malformed header is no session, never a 500
                return None
            if name in jar:
                return jar[name].value
    return None


def _dump(data: dict[str, Any]) -> str:
    return json.dumps(data, sort_keys=True, default=str)
