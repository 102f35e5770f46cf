"""The operations pages' commands, run as printed: several processes, upgrades, quotas, backups.

Each test takes its block from the page (`docblocks.block`) and runs it with bash, with `almanac`
on PATH as an installation has it; only the database's address and the folders are the test's own.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
from pathlib import Path

import httpx
import pytest

from almanac.settings import Settings
from tests.support.docblocks import ROOT, block
from tests.support.pg import find_bin
from tests.support.proc import ALMANAC, Server, almanac, cli_env, free_port
from tests.support.wait import wait_until

PATH = f"{Path(ALMANAC).parent}:{Path(find_bin('pg_dump') or '/usr/bin/pg_dump').parent}:/usr/bin:/bin"


def _bash(script: str, env: dict[str, str], cwd: Path) -> str:
    done = subprocess.run(["bash", "-c", "set -euo pipefail\n" + script], env={**env, "PATH": PATH}, cwd=cwd,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr + done.stdout
    return done.stdout


def _ready(port: int) -> bool:
    try:
        return httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def test_several_processes_start_as_the_page_says(settings: Settings, backend: str, tmp_path: Path) -> None:
    if backend != "postgresql":
        pytest.skip("the page is about PostgreSQL")
    port = free_port()
    env = {**cli_env(settings, ALMANAC_PORT=str(port)), "PATH": PATH}
    script = "\n".join(line for line in block("docs/operations/postgresql.md", "several-processes").splitlines()
                       if not line.startswith("export ALMANAC_DATABASE_URL="))  # the test's own database instead
    shell = subprocess.Popen(["bash", "-c", "set -euo pipefail\n" + script], env=env, cwd=tmp_path,
                             start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        assert shell.wait(timeout=300) == 0, shell.stderr.read() if shell.stderr else ""
        wait_until(lambda: _ready(port), timeout=90, what="almanac serve answers /readyz")
        assert "acme" in almanac("tenant", "list", env=env).stdout
        workers = subprocess.run(["pgrep", "-g", str(shell.pid), "-f", "almanac worker"], capture_output=True, text=True)
        assert workers.stdout.strip(), "the worker runs beside the server"
    finally:
        os.killpg(shell.pid, signal.SIGTERM)


def test_upgrade_quota_and_retention_commands(settings: Settings, tmp_path: Path) -> None:
    env = cli_env(settings)
    assert almanac("tenant", "create", "acme", "--admin-email", "ops@acme.test", env=env).returncode == 0
    _bash(block("docs/operations/install.md", "upgrade"), env, tmp_path)
    shown = _bash(block("docs/operations/retention-and-quotas.md", "quotas-and-retention"), env, tmp_path)
    assert "20000" in shown and "500" in shown and "30" in shown
    assert "20000" in almanac("tenant", "quota", "acme", env=env).stdout


def test_a_sqlite_backup_taken_while_serving_restores(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ALMANAC_")}
    env.update(ALMANAC_PORT=str(free_port()), ALMANAC_LOG_LEVEL="warning")
    server = Server(env, "--demo", cwd=tmp_path)  # `make run`'s layout: ./var beside the working folder
    try:
        server.wait_ready()
        token = almanac("token", "create", "--tenant", "demo", "--name", "b", "--role", "admin", env=env,
                        cwd=tmp_path).stdout.strip().splitlines()[-1]
        api = server.client(token)
        assert api.put("/api/v1/kv/kept", json={"value": {"before": "backup"}}).status_code in (200, 201)
        backup = block("docs/operations/backups.md", "sqlite-backup").replace("docs/examples/", f"{ROOT}/docs/examples/")
        _bash(backup + 'echo "$BACKUP" > backup-path\n', env, tmp_path)  # taken while the server runs
        api.put("/api/v1/kv/after", json={"value": 1})
    finally:
        server.stop()
    taken = (tmp_path / "backup-path").read_text().strip()
    _bash(f"BACKUP={taken}\n" + block("docs/operations/backups.md", "sqlite-restore"), env, tmp_path)
    with sqlite3.connect(tmp_path / "var" / "tenants" / "demo.db") as restored:
        keys = {row[0] for row in restored.execute("SELECT key FROM kv")}
    assert "kept" in keys and "after" not in keys  # the data as it was when the backup was taken
    assert (tmp_path / "var" / "secret_key").read_bytes() == (tmp_path / "var.before-restore" / "secret_key").read_bytes()


def test_a_pg_dump_restores_into_a_new_database(settings: Settings, backend: str, tmp_path: Path) -> None:
    if backend != "postgresql":
        pytest.skip("pg_dump is PostgreSQL's")
    env = cli_env(settings)
    assert almanac("tenant", "create", "acme", "--admin-email", "ops@acme.test", env=env).returncode == 0
    pgurl = settings.database_url.replace("postgresql+psycopg://", "postgresql://")
    pages = block("docs/operations/backups.md", "pg-backup") + block("docs/operations/backups.md", "pg-restore")
    _bash(pages, {**env, "PGURL": pgurl}, tmp_path)
    restored = pgurl.rsplit("/", 1)[0] + "/almanac_restored"
    env["ALMANAC_DATABASE_URL"] = restored.replace("postgresql://", "postgresql+psycopg://")
    try:
        assert "acme" in almanac("tenant", "list", env=env).stdout
    finally:
        _bash('dropdb --maintenance-db="$PGURL" almanac_restored', {**env, "PGURL": pgurl}, tmp_path)
