"""Wake-ups across processes by LISTEN/NOTIFY, and the listener's reconnection."""

from __future__ import annotations

import queue

import pytest
from sqlalchemy import text

from almanac.db import Database
from almanac.platform.notify import Listener, Notifier, notify_in

pytestmark = pytest.mark.postgres


def _listening(database: Database, **kwargs) -> tuple[Listener, "queue.Queue[str]", list[int]]:
    got: "queue.Queue[str]" = queue.Queue()
    connects: list[int] = []
    listener = Listener(database.url, got.put, on_connect=lambda: connects.append(1), poll_s=0.1, **kwargs)
    listener.start()
    assert listener.connected.wait(10)
    return listener, got, connects


def test_a_notification_after_commit_reaches_the_listener_with_the_slug(database: Database) -> None:
    listener, got, connects = _listening(database)
    try:
        assert Notifier(database).notify("acme")
        assert got.get(timeout=5) == "acme"
        assert connects == [1]
    finally:
        listener.stop()


def test_a_wake_up_sent_in_a_transaction_arrives_at_its_commit_and_not_after_a_rollback(database: Database) -> None:
    from datetime import datetime, timezone

    from almanac.tenants import registry

    registry.create_tenant(database, "acme", admin_email="a@acme.test", admin_password="correct-horse-battery",
                           name="acme", min_interval_seconds=60, now=datetime.now(timezone.utc))
    listener, got, _ = _listening(database)
    try:
        with pytest.raises(RuntimeError):
            with database.tenant_session("acme") as s:
                notify_in(s, "rolled-back")
                raise RuntimeError("the request failed")
        with database.tenant_session("acme") as s:
            notify_in(s, "acme")
            assert got.empty()  # not before the commit
        assert got.get(timeout=5) == "acme"  # the rolled-back one never came
    finally:
        listener.stop()


def test_the_listener_reconnects_when_its_connection_is_killed(database: Database) -> None:
    listener, got, connects = _listening(database, backoff_s=0.05)
    try:
        with database.engine.connect() as conn:  # what a database restart does to the session
            conn.execute(text("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                              "WHERE query LIKE 'LISTEN%' AND pid <> pg_backend_pid()"))
            conn.commit()
        import time

        deadline = time.monotonic() + 10
        while listener.connections < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert listener.connections == 2 and len(connects) == 2  # on_connect: the caller re-wakes its tenants
        assert listener.connected.wait(5)
        Notifier(database).notify("after")
        assert got.get(timeout=5) == "after"
    finally:
        listener.stop()


def test_everything_is_a_no_op_on_sqlite(sqlite_settings) -> None:
    db = Database(sqlite_settings)
    try:
        assert Listener.for_database(db, print) is None
        assert Notifier(db).notify("acme") is False
    finally:
        db.dispose()
