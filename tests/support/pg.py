"""A throwaway PostgreSQL server for the test session.

Started in a temporary folder with `initdb` and `pg_ctl` on a free port, as the
`postgres` user when we are root (initdb refuses root), and stopped at the end.
`ALMANAC_TEST_PG_URL` points the tests at an existing server instead.
Each test gets its own database, cloned from a migrated template (fast, isolated).
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import uuid
from pathlib import Path

import psycopg

TEMPLATE = "almanac_template"


def find_bin(name: str) -> str | None:
    candidates = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"), reverse=True)
    return candidates[0] if candidates else shutil.which(name)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class PgServer:
    def __init__(self) -> None:
        self.url = os.environ.get("ALMANAC_TEST_PG_URL")
        self.tmp: str | None = None
        self.port = 0

    @property
    def available(self) -> bool:
        return bool(self.url) or find_bin("initdb") is not None

    def _run(self, *args: str) -> None:
        cmd = list(args)
        if os.geteuid() == 0:
            cmd = ["runuser", "-u", "postgres", "--", *cmd]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=120)

    def start(self) -> str:
        if self.url:
            return self.url
        self.tmp = tempfile.mkdtemp(prefix="almanac-pg-")
        if os.geteuid() == 0:
            shutil.chown(self.tmp, "postgres", "postgres")
        data = Path(self.tmp) / "data"
        self.port = _free_port()
        self._run(find_bin("initdb"), "-D", str(data), "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync")
        options = (
            f"-p {self.port} -k {self.tmp} -c listen_addresses=127.0.0.1 -c fsync=off "
            "-c synchronous_commit=off -c full_page_writes=off -c max_connections=300"
        )
        self._run(find_bin("pg_ctl"), "-D", str(data), "-o", options, "-l", str(Path(self.tmp) / "log"), "-w", "start")
        self.url = f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/postgres"
        return self.url

    def stop(self) -> None:
        if self.tmp is None:
            return
        try:
            self._run(find_bin("pg_ctl"), "-D", str(Path(self.tmp) / "data"), "-m", "immediate", "-w", "stop")
        finally:
            shutil.rmtree(self.tmp, ignore_errors=True)
            self.tmp = None

    def _admin(self) -> psycopg.Connection:
        assert self.url
        return psycopg.connect(self.url.replace("postgresql+psycopg", "postgresql"), autocommit=True)

    def url_for(self, dbname: str) -> str:
        assert self.url
        return self.url.rsplit("/", 1)[0] + "/" + dbname

    def create_database(self, template: str | None = None) -> str:
        name = "test_" + uuid.uuid4().hex[:12]
        with self._admin() as conn:
            clause = f" TEMPLATE {template}" if template else ""
            conn.execute(f'CREATE DATABASE "{name}"{clause}')
        return name

    def create_template(self, migrate: object) -> None:
        """Create (once) the migrated template database; `migrate(url)` runs the shared migrations."""
        with self._admin() as conn:
            exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (TEMPLATE,)).fetchone()
            if exists:
                return
            conn.execute(f"CREATE DATABASE {TEMPLATE}")
        migrate(self.url_for(TEMPLATE))  # type: ignore[operator]

    def drop_database(self, name: str) -> None:
        with self._admin() as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
