"""The real `almanac` command in subprocesses, on SQLite and PostgreSQL."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from almanac.settings import Settings
from tests.support.proc import Server, almanac, cli_env, settings_of


@pytest.fixture
def env(settings: Any) -> dict[str, str]:
    return cli_env(settings)


def test_a_tenant_from_the_command_line_to_an_api_call(env: dict[str, str]) -> None:
    assert almanac("migrate", env=env).returncode == 0
    made = almanac("tenant", "create", "acme", "--admin-email", "a@acme.test", "--name", "Acme Inc",
                   "--min-interval-seconds", "30", env=env)
    assert made.returncode == 0, made.stderr
    assert "generated password" in made.stdout
    listed = almanac("tenant", "list", env=env)
    assert listed.stdout.splitlines() == ["acme\tAcme Inc\tmin_interval=30s"]
    added = almanac("user", "add", "--tenant", "acme", "--email", "e@acme.test", "--role", "editor",
                    "--password", "long-enough-password", env=env)
    assert added.returncode == 0, added.stderr
    token = almanac("token", "create", "--tenant", "acme", "--name", "ci", "--role", "editor", env=env)
    assert token.returncode == 0
    plaintext = token.stdout.strip().splitlines()[-1]
    assert plaintext.startswith("alm_") and " " not in plaintext
    server = Server(env, "--no-scheduler").wait_ready()
    try:
        with server.client(plaintext) as client:
            me = client.get("/api/v1/tenant").json()
            quotas = me.pop("quotas")  # with each quota's use
            assert me == {"slug": "acme", "name": "Acme Inc", "role": "editor", "min_interval_seconds": 30}
            assert quotas["schedules"]["limit"] == 10_000 and quotas["schedules"]["used"] == 0
            assert client.get("/api/v1/tokens").json()["error"]["code"] == "forbidden"
    finally:
        server.stop()


@pytest.fixture(scope="module")
def one_tenant_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """One SQLite installation with tenant `acme`, shared by the wrong-input cases (each checks it is unchanged)."""
    var = tmp_path_factory.mktemp("cli") / "var"
    env = cli_env(Settings(database_url=f"sqlite:///{var}/almanac.db", var_dir=var, secret_key="k" * 32))
    assert almanac("tenant", "create", "acme", "--admin-email", "a@acme.test", env=env).returncode == 0
    return env


def _tenants(env: dict[str, str]) -> list[tuple[str, int]]:
    from almanac.db import Database
    from almanac.tenants import registry

    db = Database(settings_of(env))
    try:
        with db.shared_session() as session:
            return [(t.slug, t.min_interval_seconds) for t in registry.list_tenants(session)]
    finally:
        db.dispose()


@pytest.mark.parametrize(
    "args",
    [
        ["tenant", "create", "acme", "--admin-email", "x@y.test"],  # exists
        ["tenant", "create", "Bad_Slug", "--admin-email", "x@y.test"],
        ["tenant", "create", "new-one", "--admin-email", "nope"],
        ["tenant", "create", "new-one", "--admin-email", "x@y.test", "--admin-password", "short"],
        ["tenant", "create", "new-one", "--admin-email", "x@y.test", "--min-interval-seconds", "abc"],
        ["tenant", "create", "new-one", "--admin-email", "x@y.test", "--min-interval-seconds", "0"],
        ["tenant", "create"],
        ["user", "add", "--tenant", "nope", "--email", "x@y.test", "--role", "viewer"],
        ["user", "add", "--tenant", "acme", "--email", "x@y.test", "--role", "boss"],
        ["user", "add", "--tenant", "acme", "--email", "a@acme.test", "--role", "viewer"],  # already a member
        ["token", "create", "--tenant", "nope", "--name", "x", "--role", "viewer"],
        ["token", "create", "--tenant", "acme", "--name", "x", "--role", "root"],
        ["frobnicate"],
        ["serve", "--port", "99999"],
        ["tenant", "retention", "nope", "--days", "7"],
        ["tenant", "retention", "acme", "--days", "0"],
        ["tenant", "retention", "acme", "--days", "7", "--default"],
        ["prune", "--tenant", "nope"],
        ["prune", "--batch", "0"],
    ],
    ids=lambda a: " ".join(a)[:60],
)
def test_wrong_input_is_one_line_exit_2_and_changes_nothing(one_tenant_env: dict[str, str], args: list[str]) -> None:
    env = one_tenant_env
    result = almanac(*args, env=env)
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert len(result.stderr.strip().splitlines()) == 1 and result.stderr.startswith("almanac: error:")
    assert _tenants(env) == [("acme", 60)]  # read here: a second CLI process per case doubled its cost
    var = Path(env["ALMANAC_VAR_DIR"])
    assert sorted(p.name for p in (var / "tenants").glob("*.db")) == ["acme.db"]


def test_migrate_exit_status_says_whether_every_tenant_migrated(env: dict[str, str], settings: Any) -> None:
    from sqlalchemy import Column, MetaData, String, Table

    from almanac.db import TENANT_SCHEMA, Database

    for slug in ("one", "two"):
        assert almanac("tenant", "create", slug, "--admin-email", f"a@{slug}.test", env=env).returncode == 0
    db = Database(settings)
    version = Table("alembic_version", MetaData(), Column("version_num", String(32)), schema=TENANT_SCHEMA)
    with db.tenant_connection("one") as conn:
        conn.execute(version.update().values(version_num="not_a_revision"))
        conn.commit()
    db.dispose()
    done = almanac("migrate", env=env)
    assert done.returncode == 1
    assert "tenant one: migration failed" in done.stderr and "not_a_revision" in done.stderr
    assert "1 tenant(s) failed" in done.stdout and "migrated the shared schema and 1 tenant(s)" in done.stdout


def test_every_server_log_line_is_json(sqlite_settings: Settings) -> None:
    """`almanac serve`'s own lines, uvicorn's startup and access lines included, are JSON objects."""
    import json

    env = cli_env(sqlite_settings, ALMANAC_LOG_LEVEL="info")
    assert almanac("migrate", env=env).returncode == 0
    server = Server(env, "--no-scheduler").wait_ready()
    try:
        with server.client() as client:
            assert client.get("/healthz").status_code == 200
    finally:
        server.stop()
    lines = [line for line in server.log.read_text().splitlines() if line.strip()]
    entries = [json.loads(line) for line in lines]  # raises on the first line that is not JSON
    assert any(e["event"] == "http.request" and e["path"] == "/healthz" and e["status"] == 200 for e in entries)
    assert any(e["logger"].startswith("uvicorn") and e["event"] != "http.request" for e in entries)


def test_secrets_rotate_key_reencrypts_under_a_new_key_file(env: dict[str, str], settings: Any) -> None:
    from cryptography.fernet import Fernet

    from almanac.db import Database
    from almanac.platform.clock import SystemClock
    from almanac.vault import store
    from almanac.vault.keyring import Keyring

    assert almanac("migrate", env=env).returncode == 0
    assert almanac("tenant", "create", "acme", "--admin-email", "a@acme.test", env=env).returncode == 0
    db = Database(settings)
    try:
        with db.tenant_session("acme") as s:
            store.put(s, Keyring(None, settings.var_dir), "API_TOKEN", "value-1234", now=SystemClock().now())
        old = (settings.var_dir / "secrets_key").read_text().strip()
        rotated = almanac("secrets", "rotate-key", env=env)
        assert rotated.returncode == 0, rotated.stderr
        assert "re-encrypted 1 secret(s)" in rotated.stdout
        new = (settings.var_dir / "secrets_key").read_text().strip()
        assert new != old and "," not in new
        with db.tenant_session("acme") as s:
            assert store.values(s, Keyring(new, settings.var_dir)) == {"API_TOKEN": "value-1234"}
    finally:
        db.dispose()
    one_key = almanac("secrets", "rotate-key", env={**env, "ALMANAC_SECRETS_KEY": Fernet.generate_key().decode()})
    assert one_key.returncode == 2 and "NEW,OLD" in one_key.stderr and len(one_key.stderr.splitlines()) == 1


def test_retention_and_prune_from_the_command_line(one_tenant_env: dict[str, str]) -> None:
    env = one_tenant_env
    assert almanac("tenant", "retention", "acme", env=env).stdout == "acme\tretention 30 days\n"
    assert almanac("tenant", "retention", "acme", "--days", "7", env=env).stdout == "acme\tretention 7 days\n"
    assert almanac("tenant", "retention", "acme", env=env).stdout == "acme\tretention 7 days\n"
    pruned = almanac("prune", env=env)
    assert pruned.returncode == 0, pruned.stderr
    assert pruned.stdout == "acme\truns 0\toccurrences 0\tevents 0\tdeliveries 0\n"
    assert almanac("tenant", "retention", "acme", "--default", env=env).stdout == "acme\tretention 30 days\n"


def test_serve_believes_no_forwarded_address_unless_its_proxy_is_named(env: dict[str, str]) -> None:
    """uvicorn alone trusts X-Forwarded-For from 127.0.0.1: anyone on the machine could forge the
    audit log's address and dodge the sign-in throttle's per-address count."""
    assert almanac("migrate", env=env).returncode == 0
    assert almanac("tenant", "create", "acme", "--admin-email", "a@acme.test", env=env).returncode == 0
    token = almanac("token", "create", "--tenant", "acme", "--name", "ci", "--role", "admin",
                    env=env).stdout.strip().splitlines()[-1]
    for trusted, expected in (("", "127.0.0.1"), ("127.0.0.1", "203.0.113.9")):
        server = Server({**env, "ALMANAC_TRUSTED_PROXIES": trusted}, "--no-scheduler").wait_ready()
        try:
            with server.client(token) as client:
                put = client.put("/api/v1/kv/k", json={"value": 1}, headers={"X-Forwarded-For": "203.0.113.9"})
                assert put.status_code in (200, 201), put.text
                (entry,) = client.get("/api/v1/audit", params={"limit": 1}).json()["items"]
        finally:
            server.stop()
        assert entry["address"] == expected, trusted
