"""request bodies over 1 MiB answer 413 `payload_too_large`, before being read whole."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from almanac.web.bodylimit import BODY_MAX, BodyLimit



@pytest.fixture
def backend() -> str:
    """The limit is in front of the app: the database makes no difference."""
    return "sqlite"


def _drive(declared: int | None, chunk: int, total: int) -> tuple[int, int, bool, dict[str, Any]]:
    """Send `total` bytes in `chunk`-byte messages through the middleware; (status, bytes read, app called, body)."""
    sent: list[dict[str, Any]] = []
    read = {"bytes": 0}
    called = {"app": False}

    async def receive() -> dict[str, Any]:
        size = min(chunk, total - read["bytes"])
        read["bytes"] += size
        return {"type": "http.request", "body": b"x" * size, "more_body": read["bytes"] < total}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    async def app(scope: Any, receive: Any, send: Any) -> None:
        called["app"] = True
        message = await receive()
        body = message["body"]
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": str(len(body)).encode()})

    headers = [] if declared is None else [(b"content-length", str(declared).encode())]
    scope = {"type": "http", "method": "POST", "path": "/api/v1/kv/k", "headers": headers}
    asyncio.run(BodyLimit(app)(scope, receive, send))
    status = sent[0]["status"]
    body = b"".join(m.get("body", b"") for m in sent[1:])
    return status, read["bytes"], called["app"], json.loads(body) if status == 413 else {"size": int(body)}


def test_a_declared_length_over_the_limit_is_refused_before_reading() -> None:
    status, read, called, body = _drive(100 * 1024 * 1024, 64 * 1024, 100 * 1024 * 1024)
    assert (status, read, called) == (413, 0, False)
    assert body["error"]["code"] == "payload_too_large"


def test_a_chunked_body_is_refused_once_it_passes_the_limit() -> None:
    status, read, called, body = _drive(None, 64 * 1024, 100 * 1024 * 1024)
    assert (status, called) == (413, False) and body["error"]["code"] == "payload_too_large"
    assert BODY_MAX < read <= BODY_MAX + 64 * 1024  # stopped at the first chunk past 1 MiB, not at 100 MB


def test_a_lying_content_length_does_not_get_past_the_count() -> None:
    status, read, called, _ = _drive(10, 64 * 1024, 5 * 1024 * 1024)
    assert (status, called) == (413, False) and read <= BODY_MAX + 64 * 1024


def test_a_body_within_the_limit_reaches_the_app_whole() -> None:
    status, read, called, body = _drive(None, 1000, BODY_MAX)
    assert (status, read, called, body) == (200, BODY_MAX, True, {"size": BODY_MAX})


def test_the_app_answers_413_with_the_envelope(api: Any) -> None:
    admin = api("editor")
    big = json.dumps({"value": "x" * (BODY_MAX + 10)})
    answer = admin.put("/api/v1/kv/k", content=big, headers={"Content-Type": "application/json"})
    assert answer.status_code == 413 and answer.json()["error"]["code"] == "payload_too_large"
    chunked = admin.put("/api/v1/kv/k", content=iter([big[:600_000].encode(), big[600_000:].encode()]),
                        headers={"Content-Type": "application/json"})
    assert chunked.status_code == 413 and chunked.json()["error"]["code"] == "payload_too_large"
    assert admin.get("/api/v1/kv/k").status_code == 404
    assert admin.put("/api/v1/kv/k", json={"value": "x" * 1000}).status_code == 200
