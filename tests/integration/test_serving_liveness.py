"""A server started without the scheduler (`almanac serve --no-scheduler`) runs what its requests
start (run now, run again, trials) in its own pool, through the one admission path: so it shows
itself alive as a worker does, and if it dies, those runs are taken up by another process as soon
as its liveness ends (SPEC section 11), not when their leases lapse."""

from __future__ import annotations

from typing import Any

from sqlalchemy import text
from starlette.testclient import TestClient

from almanac.platform.timer.liveness import LOCK_SPACE
from almanac.web.app import create_app


def _alive(services: Any, tag: str) -> bool:
    """Whether another process would see the process of `tag` alive: its advisory lock held (PostgreSQL),
    its lock file present (SQLite; the file is locked by whoever made it)."""
    if services.db.is_sqlite:
        return (services.settings.sqlite_dir() / "procs" / f"{tag}.lock").exists()
    with services.db.engine.connect() as conn:
        held = conn.execute(text("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted "
                                 "AND classid = :space AND objid = :key AND objsubid = 2"),
                            {"space": LOCK_SPACE, "key": int(tag, 16)}).scalar_one()
    return held == 1


def test_a_server_without_the_scheduler_is_alive_to_the_others_while_it_serves(settings: Any, services: Any) -> None:
    tag = services.store.owner_tag
    app = create_app(settings, services=services, run_scheduler=False)
    assert not _alive(services, tag)
    with TestClient(app) as client:
        assert client.get("/healthz").status_code == 200
        assert _alive(services, tag)  # a run it starts now is recovered by the others if it dies
    assert not _alive(services, tag)  # a clean stop: nothing left for the others to reap
