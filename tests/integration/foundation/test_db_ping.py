"""PostgreSQL: a pooled connection is pinged before use only if it sat idle, and a dead one is replaced.

SQLAlchemy's `pool_pre_ping` pinged at every checkout, a round trip that was a fifth of a single
PUT's time. The check that replaces it must still find a connection the database
dropped while it sat in the pool.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from sqlalchemy import text

from almanac import db as db_module
from almanac.db import Database

pytestmark = pytest.mark.postgres


def _backend(db: Database) -> int:
    with db.engine.connect() as conn:
        return int(conn.execute(text("SELECT pg_backend_pid()")).scalar_one())


def test_a_connection_used_a_moment_ago_is_not_pinged_one_left_idle_is(
        pg: Database, monkeypatch: pytest.MonkeyPatch) -> None:
    pings: list[Any] = []
    real = db_module._ping
    monkeypatch.setattr(db_module, "_ping", lambda conn: (pings.append(conn), real(conn)))
    monkeypatch.setattr(db_module, "PING_IDLE_S", 0.3)
    first = _backend(pg)
    for _ in range(5):
        assert _backend(pg) == first  # the pool's one connection, back at once
    assert pings == []
    time.sleep(0.4)
    assert _backend(pg) == first and len(pings) == 1


def test_a_connection_the_database_dropped_while_idle_is_replaced_not_handed_out(
        pg: Database, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(db_module, "PING_IDLE_S", 0.1)
    dropped = _backend(pg)
    other = Database(pg.settings)
    try:
        with other.engine.connect() as conn:
            assert conn.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": dropped}).scalar_one()
    finally:
        other.dispose()
    time.sleep(0.3)
    assert _backend(pg) != dropped  # pinged, found dead, replaced: the caller saw no error


def test_a_pinged_connection_is_handed_out_idle_so_autocommit_can_be_asked_for(
        pg: Database, monkeypatch: pytest.MonkeyPatch) -> None:
    """The ping once left its transaction open: a single PUT's autocommit statement then failed with
    "can't change 'autocommit' now" whenever its connection had been idle (a 500, in CI)."""
    monkeypatch.setattr(db_module, "PING_IDLE_S", 0.1)
    _backend(pg)
    time.sleep(0.3)
    with pg.engine.connect() as conn:
        fresh = conn.execution_options(isolation_level="AUTOCOMMIT")
        assert fresh.execute(text("SELECT 1")).scalar_one() == 1
