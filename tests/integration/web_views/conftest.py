"""View tests: a TestClient signed in through the real login form, on SQLite."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient

PASSWORD = "correct-horse-battery"
CSRF = re.compile(r'name="csrf_token" value="([^"]+)"')


@pytest.fixture
def backend() -> str:
    # Pages sit on top of the same services the API tests run on both databases; SQLite is enough here.
    return "sqlite"


def csrf_of(html: str) -> str:
    match = CSRF.search(html)
    assert match, "page has no CSRF field"
    return match.group(1)


class Browser:
    """A TestClient that remembers the last CSRF token it saw, as a browser's page would."""

    def __init__(self, app: Any) -> None:
        self.client = TestClient(app, raise_server_exceptions=True, follow_redirects=False)
        self.csrf = ""

    def get(self, url: str, **kw: Any) -> Any:
        response = self.client.get(url, **kw)
        match = CSRF.search(response.text)
        if match:
            self.csrf = match.group(1)
        return response

    def post(self, url: str, data: dict[str, Any] | None = None, *, csrf: bool = True, **kw: Any) -> Any:
        data = dict(data or {})
        if csrf:
            data.setdefault("csrf_token", self.csrf)
        return self.client.post(url, data=data, **kw)

    def login(self, email: str, password: str = PASSWORD) -> Any:
        self.get("/login")
        response = self.post("/login", {"email": email, "password": password})
        if response.status_code == 303:
            self.get(response.headers["location"])
        return response


@pytest.fixture
def browser(app: Any) -> Callable[[], Browser]:
    return lambda: Browser(app)


@pytest.fixture
def signed_in(app: Any, make_tenant: Callable[..., str], database: Any, now: Any) -> Callable[..., Browser]:
    """`signed_in(role="admin", tenant=None)`: a Browser signed in as a member of that role."""
    from almanac.tenants import people, registry

    def make(role: str = "admin", tenant: str | None = None) -> Browser:
        tenant = tenant or make_tenant()
        email = f"admin@{tenant}.test"
        if role != "admin":
            email = f"{role}@{tenant}.test"
            with database.shared_session() as session:
                people.add_member(session, registry.get_tenant(session, tenant), email, role, PASSWORD, now=now)
        b = Browser(app)
        response = b.login(email)
        assert response.status_code == 303, response.text
        b.tenant = tenant  # type: ignore[attr-defined]
        return b

    return make
