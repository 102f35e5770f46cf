"""Fixtures shared by every test level.

`database` runs each test on SQLite and on a throwaway PostgreSQL (when `initdb`
is present; with ALMANAC_REQUIRE_POSTGRES=1, as in CI, its absence is an error).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
from argon2 import PasswordHasher
from hypothesis import HealthCheck
from hypothesis import settings as hypothesis_settings

from almanac.db import Database
from almanac.platform.clock import ManualClock
from almanac.settings import Settings
from almanac.tenants import auth, migrations, passwords, registry
from tests.support.pg import PgServer
from tests.support.sandbox_cache import with_shared_cache

# Argon2 at RFC 9106's cost takes 0.3-1 s per hash on a busy CI core and the suite makes hundreds of
# accounts: tests in this process hash with the same algorithm at its lowest cost. Servers started
# in subprocesses (acceptance, browser) keep the real cost, and test_security_primitives checks it.
passwords._hasher = PasswordHasher(time_cost=1, memory_cost=8, parallelism=1)

# Property tests judge results, never time: a loaded 2-core box must not fail a correct example
# for taking long (deadline) or for generating slowly (too_slow).
hypothesis_settings.register_profile("almanac", deadline=None, suppress_health_check=[HealthCheck.too_slow])
hypothesis_settings.load_profile("almanac")

# `make test-fast` narrows this to sqlite (ALMANAC_TEST_BACKENDS=sqlite).
BACKENDS = os.environ.get("ALMANAC_TEST_BACKENDS", "sqlite,postgresql").split(",")
_PG = PgServer()
_pg_started = False


def pytest_sessionfinish(session: Any, exitstatus: int) -> None:
    if _pg_started:
        _PG.stop()


def _pg_url() -> str:
    global _pg_started
    if not _PG.available:
        if os.environ.get("ALMANAC_REQUIRE_POSTGRES") == "1":
            pytest.fail("PostgreSQL is required (ALMANAC_REQUIRE_POSTGRES=1) but initdb is not installed")
        pytest.skip("PostgreSQL server binaries (initdb) not installed")
    if not _pg_started:
        _PG.start()
        _pg_started = True
        _PG.create_template(_migrate_template)
    return _PG.url_for(_PG.create_database(template="almanac_template"))


def _migrate_template(url: str) -> None:
    db = Database(_settings_for(url, Path("/tmp")))
    try:
        migrations.upgrade_shared(db)
    finally:
        db.dispose()


def _settings_for(url: str, var_dir: Path) -> Settings:
    return Settings(database_url=url, var_dir=var_dir, secret_key="test-secret-key-0123456789abcdef")


@pytest.fixture(scope="session")
def sandbox_image_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One directory of compiled sandbox images for the whole run, every xdist worker included.

    Compiling QuickJS takes 1.4 s of CPU; a test whose server or pool starts with an empty cache
    pays it again. Writes into the cache are atomic (os.replace), so processes may share it. The
    sandbox's own cold-start and corrupt-cache tests use directories of their own.
    """
    base = tmp_path_factory.getbasetemp()
    root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    cache = root / "shared-sandbox-cache"
    cache.mkdir(exist_ok=True)
    return cache


@pytest.hookimpl(tryfirst=True)  # before the fixture's own params, which then stand aside
def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    # A module marked `any_backend` runs on SQLite alone: what it tests does not touch SQL that
    # differs between the backends (the store, claims, tenant isolation and migrations run on both).
    if "backend" in metafunc.fixturenames and metafunc.definition.get_closest_marker("any_backend"):
        metafunc.parametrize("backend", [b for b in BACKENDS if b == "sqlite"] or BACKENDS[:1])


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def settings(backend: str, tmp_path: Path, sandbox_image_cache: Path) -> Settings:
    var = with_shared_cache(tmp_path / "var", sandbox_image_cache)
    if backend == "sqlite":
        return _settings_for(f"sqlite:///{var}/almanac.db", var)
    return _settings_for(_pg_url(), var)


@pytest.fixture(scope="session")
def database_url_for() -> Callable[[str, Path], str]:
    """`url(backend, var_dir)`: a new, empty database's URL on that backend, for set-ups that outlive one
    test (a module-scoped fixture cannot use `settings`)."""
    return lambda backend, var: f"sqlite:///{var}/almanac.db" if backend == "sqlite" else _pg_url()


@pytest.fixture
def sqlite_settings(tmp_path: Path, sandbox_image_cache: Path) -> Settings:
    var = with_shared_cache(tmp_path / "var", sandbox_image_cache)
    return _settings_for(f"sqlite:///{var}/almanac.db", var)


_shared_sqlite_file: list[bytes] = []


def _seed_shared_sqlite(settings: Settings) -> bool:
    """Start a test's SQLite database as a copy of one migrated once a process (PostgreSQL tests
    start from a template database the same way): alembic per test cost ~30-90 ms of CPU."""
    if not _shared_sqlite_file:
        folder = Path(tempfile.mkdtemp(prefix="almanac-shared-template-"))
        template = Database(_settings_for(f"sqlite:///{folder}/almanac.db", folder))
        migrations.upgrade_shared(template)
        template.dispose()
        _shared_sqlite_file.append((folder / "almanac.db").read_bytes())
        shutil.rmtree(folder)
    target = Path(settings.database_url.split("///", 1)[1])
    if target.exists():
        return False
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(_shared_sqlite_file[0])
    return True


@pytest.fixture
def database(settings: Settings) -> Iterator[Database]:
    seeded = settings.database_url.startswith("sqlite") and _seed_shared_sqlite(settings)
    db = Database(settings)
    if not seeded:
        migrations.upgrade_shared(db)
    yield db
    db.dispose()


@pytest.fixture
def pg(database: Database) -> Database:
    """`database` on PostgreSQL only: for tests of PostgreSQL's own behaviour (skipped on SQLite)."""
    if database.is_sqlite:
        pytest.skip("PostgreSQL only")
    return database


@pytest.fixture
def now() -> datetime:
    return datetime(2026, 11, 21, 9, 0, tzinfo=timezone.utc)


@pytest.fixture
def manual_clock(now: datetime) -> ManualClock:
    return ManualClock(now)


@pytest.fixture
def make_tenant(database: Database, now: datetime) -> Callable[..., str]:
    counter = iter(range(1, 10_000))

    def make(slug: str | None = None, *, min_interval_seconds: int = 60) -> str:
        slug = slug or f"tenant-{next(counter)}"
        registry.create_tenant(
            database, slug, admin_email=f"admin@{slug}.test", admin_password="correct-horse-battery",
            name=slug.title(), min_interval_seconds=min_interval_seconds, now=now,
        )
        return slug

    return make


@pytest.fixture
def services(settings: Settings, database: Database, manual_clock: ManualClock) -> Iterator[Any]:
    from almanac.worker import build_services

    built = build_services(settings, clock=manual_clock)
    yield built
    built.scheduler.timer.stop(5)  # the recorder that runs started by requests use
    built.runner.close()  # a run through the API may have started the sandbox pool
    built.db.dispose()


@pytest.fixture
def app(services: Any) -> Any:
    from tests.support.apps import app_for

    return app_for(services)


@pytest.fixture
def issue_token(database: Database, now: datetime) -> Callable[[str, str], str]:
    def issue(tenant: str, role: str = "admin") -> str:
        with database.shared_session() as session:
            row = registry.get_tenant(session, tenant)
            return auth.create_token(session, row, f"{role} token", role, now=now)[1]

    return issue


@pytest.fixture
def api(app: Any, make_tenant: Callable[..., str], issue_token: Callable[[str, str], str]) -> Callable[..., Any]:
    """`api(role="admin", tenant=None)` -> a TestClient carrying a Bearer token of that tenant and role."""
    from fastapi.testclient import TestClient

    clients: list[Any] = []

    def client(role: str = "admin", tenant: str | None = None) -> Any:
        tenant = tenant or make_tenant()
        test_client = TestClient(app, raise_server_exceptions=False)
        test_client.headers["Authorization"] = f"Bearer {issue_token(tenant, role)}"
        test_client.tenant = tenant  # type: ignore[attr-defined]
        clients.append(test_client)
        return test_client

    return client
