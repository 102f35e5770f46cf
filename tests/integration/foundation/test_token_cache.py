"""The API token cache: a verified token is not looked up again for `token_cache_s`; a
wrong secret is still refused; a revocation here is honoured at once, one by another process within
the cache's time."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from typing import Any, Callable

from fastapi.testclient import TestClient
from sqlalchemy import event, update

from almanac.tenants import tokens
from almanac.tenants.models import ApiToken


@contextmanager
def _statements(database: Any) -> Iterator[list[str]]:
    seen: list[str] = []

    def record(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        seen.append(statement)

    event.listen(database.engine, "before_cursor_execute", record)
    try:
        yield seen
    finally:
        event.remove(database.engine, "before_cursor_execute", record)


class _Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def _cache(app: Any) -> Any:
    cache = app.state.token_cache
    cache.clock = _Clock()
    return cache


def test_a_verified_token_is_not_looked_up_again_within_the_cache_time(api: Callable[..., Any], app: Any,
                                                                         services: Any) -> None:
    cache = _cache(app)
    assert cache.ttl_s == 2.0  # the default, ALMANAC_TOKEN_CACHE_S
    viewer = api("viewer")
    assert viewer.get("/api/v1/tenant").status_code == 200
    with _statements(services.db) as seen:
        assert viewer.get("/api/v1/tenant").status_code == 200
    assert not [s for s in seen if "api_tokens" in s], seen
    cache.clock.t += 2.5  # past the cache time: looked up again
    with _statements(services.db) as seen:
        assert viewer.get("/api/v1/tenant").status_code == 200
    assert [s for s in seen if "api_tokens" in s]


def test_a_cached_public_id_with_another_secret_is_refused(api: Callable[..., Any], app: Any) -> None:
    _cache(app)
    viewer = api("viewer")
    assert viewer.get("/api/v1/tenant").status_code == 200
    token = viewer.headers["Authorization"].removeprefix("Bearer ")
    public_id, secret = tokens.split(token)  # type: ignore[misc]
    forged = f"{tokens.PREFIX}{public_id}_{'x' * len(secret)}"
    answer = TestClient(app).get("/api/v1/tenant", headers={"Authorization": f"Bearer {forged}"})
    assert answer.status_code == 401 and answer.json()["error"]["code"] == "unauthorized"


def test_a_token_revoked_by_another_process_stops_working_within_the_cache_time(
        api: Callable[..., Any], app: Any, database: Any) -> None:
    cache = _cache(app)
    viewer = api("viewer")
    assert viewer.get("/api/v1/tenant").status_code == 200
    token = viewer.headers["Authorization"].removeprefix("Bearer ")
    public_id = tokens.split(token)[0]  # type: ignore[index]
    with database.shared_session() as s:  # as another process would: straight in the database
        s.execute(update(ApiToken).where(ApiToken.public_id == public_id)
                  .values(revoked_at=datetime.now(timezone.utc)))
    assert viewer.get("/api/v1/tenant").status_code == 200  # still cached: the documented bound
    cache.clock.t += cache.ttl_s
    answer = viewer.get("/api/v1/tenant")
    assert answer.status_code == 401 and answer.json()["error"]["code"] == "unauthorized"


def test_a_token_revoked_through_the_api_stops_working_at_once(api: Callable[..., Any], app: Any) -> None:
    _cache(app)
    admin = api("admin")
    created = admin.post("/api/v1/tokens", json={"name": "ci", "role": "viewer"}).json()
    other = TestClient(app)
    other.headers["Authorization"] = f"Bearer {created['token']}"
    assert other.get("/api/v1/tenant").status_code == 200  # now cached
    assert admin.delete(f"/api/v1/tokens/{created['id']}").status_code == 200
    assert other.get("/api/v1/tenant").status_code == 401


def test_no_cache_when_the_cache_time_is_zero(api: Callable[..., Any], app: Any, services: Any) -> None:
    app.state.token_cache.ttl_s = 0
    viewer = api("viewer")
    assert viewer.get("/api/v1/tenant").status_code == 200
    with _statements(services.db) as seen:
        assert viewer.get("/api/v1/tenant").status_code == 200
    assert [s for s in seen if "api_tokens" in s]
