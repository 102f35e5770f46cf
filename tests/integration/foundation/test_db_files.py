"""The embedded database's files are the server user's alone: 0600 files (WAL and shared-memory
files included) in 0700 folders, as the key files beside them already were."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest
from sqlalchemy import text

from almanac.db import Database
from almanac.settings import Settings
from almanac.tenants import migrations, registry


@pytest.fixture
def usual_umask() -> Iterator[None]:
    old = os.umask(0o022)  # the common default, under which SQLite makes its files 0644
    yield
    os.umask(old)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_the_embedded_database_files_are_private(tmp_path: Path, now: datetime, usual_umask: None) -> None:
    var = tmp_path / "var"
    db = Database(Settings(database_url=f"sqlite:///{var}/almanac.db", var_dir=var))
    try:
        migrations.upgrade_shared(db)
        registry.create_tenant(db, "acme", admin_email="a@acme.test", admin_password="correct-horse-battery",
                               name="Acme", min_interval_seconds=60, now=now)
        with db.tenant_session("acme") as session:  # the files are open, so WAL and -shm files exist
            session.execute(text("SELECT 1"))
            files = [var / "almanac.db", var / "tenants" / "acme.db"]
            files += [Path(f"{f}{suffix}") for f in files for suffix in ("-wal", "-shm")]
            assert {f.name: oct(_mode(f)) for f in files} == {f.name: oct(0o600) for f in files}
    finally:
        db.dispose()
    assert {d.name: oct(_mode(d)) for d in (var, var / "tenants")} == {"var": "0o700", "tenants": "0o700"}


def test_a_folder_the_key_files_create_is_private_too(tmp_path: Path, usual_umask: None) -> None:
    var = tmp_path / "keys" / "var"
    Settings(var_dir=var).resolved_secret_key()
    assert oct(_mode(var)) == "0o700" and oct(_mode(var / "secret_key")) == "0o600"
