"""The request body limit (SPEC section 4): over 1 MiB answers 413 `payload_too_large`, before reading it all.

A pure ASGI middleware. A `Content-Length` over the limit is refused before a byte of the
body is read; a body without one (chunked) is counted as it arrives and refused as soon as
it passes the limit. A body within the limit is buffered (at most 1 MiB) and replayed to the
app, which then reads it as usual. The two batch routes (POST only) may send 4 MiB: see `LARGER`.
"""

from __future__ import annotations

from typing import Any

from almanac.web.errors import envelope

BODY_MAX = 1024 * 1024
# The batch routes take up to 1,000 items, each as its single route takes it: 1,000 jobs with a few
# hundred bytes of payload each pass 1 MiB, so these paths (exactly these) may send 4 MiB.
BATCH_BODY_MAX = 4 * 1024 * 1024
LARGER = {"/api/v1/jobs/batch": BATCH_BODY_MAX, "/api/v1/schedules/batch": BATCH_BODY_MAX}


class BodyLimit:
    def __init__(self, app: Any, limit: int = BODY_MAX, larger: dict[str, int] | None = None) -> None:
        self.app, self.default = app, limit
        self.larger = LARGER if larger is None else larger

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.larger.get(scope.get("path", ""), self.default) if scope.get("method") == "POST" else self.default
        declared = _content_length(scope)
        if declared is not None and declared > limit:
            await self._refuse(scope, receive, send, limit)
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
            if size > limit:
                await self._refuse(scope, receive, send, limit)
                return
            chunks.append(body)
            if not message.get("more_body", False):
                pending = None
                break
        await self.app(scope, _replay(None if gone else chunks, pending, receive), send)

    async def _refuse(self, scope: dict[str, Any], receive: Any, send: Any, limit: int) -> None:
        response = envelope(413, "payload_too_large", f"The request body is over the {limit // 1024} KiB limit.")
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
