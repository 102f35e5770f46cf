"""The request body limit (SPEC section 4): over 1 MiB answers 413 `payload_too_large`, before reading it all.

A pure ASGI middleware. A `Content-Length` over the limit is refused before a byte of the
body is read; a body without one (chunked) is counted as it arrives and refused as soon as
it passes the limit. A body within the limit is buffered (at most 1 MiB) and replayed to the
app, which then reads it as usual.
"""

from __future__ import annotations

from typing import Any

from almanac.web.errors import envelope

BODY_MAX = 1024 * 1024


class BodyLimit:
    def __init__(self, app: Any, limit: int = BODY_MAX) -> None:
        self.app, self.limit = app, limit

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        if declared is not None and declared > self.limit:
            await self._refuse(scope, receive, send)
            return
        chunks: list[bytes] = []
        pending: dict[str, Any] | None
        size, gone = 0, False
        while True:
            message = await receive()
            if message["type"] != "http.request":  # the client went away: let the app see it
                gone = True
                pending = message
                break
            body = message.get("body", b"")
            size += len(body)
            if size > self.limit:
                await self._refuse(scope, receive, send)
                return
            chunks.append(body)
            if not message.get("more_body", False):
                pending = None
                break
        await self.app(scope, _replay(None if gone else chunks, pending, receive), send)

    async def _refuse(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        response = envelope(413, "payload_too_large",
                            f"The request body is over the {self.limit // 1024} KiB limit.")
        response.headers["Connection"] = "close"  # the rest of the body is not read
        await response(scope, receive, send)


def _content_length(scope: dict[str, Any]) -> int | None:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


def _replay(chunks: list[bytes] | None, pending: dict[str, Any] | None, receive: Any) -> Any:
    """A `receive` that hands the buffered body over in one message, then defers to the real one."""
    state = {"sent": chunks is None}

    async def replay() -> dict[str, Any]:
        if not state["sent"]:
            state["sent"] = True
            return {"type": "http.request", "body": b"".join(chunks or []), "more_body": False}
        if pending is not None:
            message = dict(pending)
            return message
        return await receive()

    return replay
