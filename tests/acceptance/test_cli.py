"""The real `almanac` command in subprocesses, on SQLite and PostgreSQL."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from almanac.settings import Settings
from tests.support.proc import Server, almanac, cli_env


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
            quotas = me.pop("quotas")  # with each quota's use (issue 15)
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
    ],
    ids=lambda a: " ".join(a)[:60],
)
def test_wrong_input_is_one_line_exit_2_and_changes_nothing(one_tenant_env: dict[str, str], args: list[str]) -> None:
    env = one_tenant_env
    result = almanac(*args, env=env)
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert len(result.stderr.strip().splitlines()) == 1 and result.stderr.startswith("almanac: error:")
    assert almanac("tenant", "list", env=env).stdout == "acme\tacme\tmin_interval=60s\n"
    var = Path(env["ALMANAC_VAR_DIR"])
    assert sorted(p.name for p in (var / "tenants").glob("*.db")) == ["acme.db"]
