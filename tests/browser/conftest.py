"""Browser tests: Playwright drives Debian's chromium against a real `almanac serve`.

Without /usr/bin/chromium the tests skip, unless ALMANAC_REQUIRE_BROWSER=1 (CI),
where its absence is a failure. One server and one browser serve the module;
each test gets a fresh browser context (no cookies).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import httpx
import pytest

from almanac.db import Database
from almanac.settings import Settings
from almanac.tenants import auth, migrations, registry
from tests.support.proc import Server, cli_env
from tests.support.sandbox_cache import with_shared_cache

CHROMIUM = "/usr/bin/chromium"
# As the machine notes say: without the network flags chromium keeps calling out and is refused.
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
ARTIFACTS = Path(__file__).resolve().parent.parent / "artifacts"
PASSWORD = "correct-horse-battery"
SLUG = "acme"
SCRIPT = """export default async function (event) {
  const name = event.payload && event.payload.name;
  console.log("greeting", name);
  return {greeting: "hello " + name};
}
"""


def _need_chromium() -> None:
    if Path(CHROMIUM).exists() and shutil.which(CHROMIUM):
        return
    if os.environ.get("ALMANAC_REQUIRE_BROWSER") == "1":
        pytest.fail(f"{CHROMIUM} is required (ALMANAC_REQUIRE_BROWSER=1) but not installed")
    pytest.skip(f"{CHROMIUM} not installed (apt-get install chromium)")


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory, sandbox_image_cache: Path) -> Iterator[dict[str, Any]]:
    """A server with tenant `acme` (admin + viewer), one script, and an admin API token."""
    _need_chromium()
    var = with_shared_cache(tmp_path_factory.mktemp("browser") / "var", sandbox_image_cache)
    settings = Settings(database_url=f"sqlite:///{var}/almanac.db", var_dir=var,
                        secret_key="browser-test-secret-0123456789")
    now = datetime.now(timezone.utc)
    db = Database(settings)
    try:
        migrations.upgrade_shared(db)
        registry.create_tenant(db, SLUG, admin_email=f"admin@{SLUG}.test", admin_password=PASSWORD,
                               name="Acme", min_interval_seconds=60, now=now)
        with db.shared_session() as session:
            tenant = registry.get_tenant(session, SLUG)
            from almanac.tenants import people

            people.add_member(session, tenant, f"viewer@{SLUG}.test", "viewer", PASSWORD, now=now)
            token = auth.create_token(session, tenant, "setup", "admin", now=now)[1]
    finally:
        db.dispose()
    server = Server(cli_env(settings), "--no-scheduler").wait_ready()
    try:
        # The first script compiles the sandbox, which can take seconds on a busy machine.
        with httpx.Client(base_url=server.base, headers={"Authorization": f"Bearer {token}"}, timeout=60) as api:
            script = api.post("/api/v1/scripts", json={"name": "greeter", "source": SCRIPT, "timeout_ms": 20_000})
            assert script.status_code == 201, script.text
        # settings: tests that need data the UI cannot make (events, deliveries) write it directly.
        yield {"base": server.base, "script_id": script.json()["id"], "token": token, "settings": settings}
    finally:
        server.stop()


@pytest.fixture(scope="module")
def chromium(live: dict[str, Any]) -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture
def page(chromium: Any, live: dict[str, Any]) -> Iterator[Any]:
    context = chromium.new_context(base_url=live["base"], viewport={"width": 1100, "height": 800},
                                   timezone_id="Europe/Berlin", locale="en-GB")
    context.set_default_timeout(10_000)
    page = context.new_page()
    yield page
    context.close()


def shot(page: Any, name: str) -> None:
    """A full-page screenshot under tests/artifacts/ (git-ignored) to look at."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


def sign_in(page: Any, email: str = f"admin@{SLUG}.test", password: str = PASSWORD, *, go: bool = True) -> None:
    if go:
        page.goto("/login")
    page.get_by_label("Email").fill(email)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Sign in").click()
