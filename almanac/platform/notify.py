"""Wake-ups across processes: PostgreSQL LISTEN/NOTIFY on one channel, the payload a tenant's slug.

A schedule or job changed through any process must wake the timer that owns
the tenant at once, not at its next poll. The changing process sends
`pg_notify('almanac_wake', slug)`; every process keeps one `Listener` thread on
a connection of its own (outside the pool) that LISTENs and hands each slug to
a callback (the scheduler's `wake`, filtered to the tenants this process owns).

- The channel is a constant and the slug travels as a bound parameter: no SQL
  is ever built from a tenant's name.
- `Notifier.notify(slug)` is called after the caller's commit, so listeners see
  the new rows when they look.
- Notifications sent while a listener is disconnected are lost; on every
  (re)connection the listener calls `on_connect`, with which the caller wakes
  all its tenants once. Polling at `idle_s` remains the last safety net.
- On SQLite everything here is a no-op: one process or several, they all tick
  every tenant and poll.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from sqlalchemy import bindparam, func, select
from sqlalchemy.engine import make_url

from almanac.db import Database

log = logging.getLogger("almanac.notify")

CHANNEL = "almanac_wake"
_KEEPALIVE = dict(keepalives=1, keepalives_idle=10, keepalives_interval=5, keepalives_count=3)


def conninfo(url: str) -> str:
    """A libpq connection string from the SQLAlchemy URL (`postgresql+psycopg://...`)."""
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


def is_postgres(bind: Any) -> bool:
    return bind.dialect.name == "postgresql"


class Notifier:
    """Sends wake-ups after the caller's commit, on a pooled connection; never raises."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def notify(self, slug: str) -> bool:
        if self.db.is_sqlite:
            return False
        try:
            with self.db.engine.connect() as conn:
                conn.execute(select(func.pg_notify(CHANNEL, slug)))
                conn.commit()
            return True
        except Exception:  # a lost wake-up costs at most one poll interval
            log.warning("notify.failed", extra={"event": "notify.failed", "tenant": slug}, exc_info=True)
            return False


def notify_in(session: Any, slug: str) -> None:
    """A wake-up sent by the caller's own transaction: PostgreSQL delivers it at the commit (and drops
    it on a rollback). One statement, where `Notifier.notify` takes a connection and a transaction."""
    if is_postgres(session.get_bind()):
        session.connection().execute(_NOTIFY, {"slug": slug})  # one statement built once


_NOTIFY = select(func.pg_notify(CHANNEL, bindparam("slug")))


class Listener:
    """A daemon thread LISTENing on `CHANNEL` on its own connection, reconnecting with backoff."""

    def __init__(
        self, url: str, on_wake: Callable[[str], None], *, on_connect: Callable[[], None] | None = None,
        poll_s: float = 1.0, backoff_s: float = 0.2, backoff_max_s: float = 5.0, check_every_s: float = 10.0,
    ) -> None:
        self.url = url
        self.on_wake, self.on_connect = on_wake, on_connect
        self.poll_s, self.backoff_s, self.backoff_max_s = poll_s, backoff_s, backoff_max_s
        self.check_every_s = check_every_s
        self.connected = threading.Event()  # set while LISTENing (tests wait on it)
        self.connections = 0  # how many times it (re)connected
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @classmethod
    def for_database(cls, db: Database, on_wake: Callable[[str], None], **kwargs: Any) -> "Listener | None":
        return None if db.is_sqlite else cls(db.url, on_wake, **kwargs)

    def start(self) -> None:
        if self._thread is None:
            self._stop.clear()
            self._thread = threading.Thread(target=self._run, name="almanac-listen", daemon=True)
            self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    def _run(self) -> None:
        delay = self.backoff_s
        while not self._stop.is_set():
            try:
                self._listen()
                delay = self.backoff_s
            except Exception as exc:
                self.connected.clear()
                log.warning("notify.listener_lost", extra={"event": "notify.listener_lost",
                                                            "error": type(exc).__name__, "retry_in_s": delay})
                self._stop.wait(delay)
                delay = min(delay * 2, self.backoff_max_s)

    def _listen(self) -> None:
        import psycopg

        with psycopg.connect(conninfo(self.url), autocommit=True, connect_timeout=5, **_KEEPALIVE) as conn:
            conn.execute(f"LISTEN {CHANNEL}")  # a constant identifier, never a tenant's name
            self.connections += 1
            self.connected.set()
            log.info("notify.listening", extra={"event": "notify.listening", "connections": self.connections})
            self._call(self.on_connect)
            since_check = 0.0
            while not self._stop.is_set():
                for note in conn.notifies(timeout=self.poll_s):
                    self._call(self.on_wake, note.payload)
                since_check += self.poll_s
                if since_check >= self.check_every_s:  # a half-open socket shows up here
                    conn.execute("SELECT 1")
                    since_check = 0.0
        self.connected.clear()

    @staticmethod
    def _call(callback: Callable[..., None] | None, *args: Any) -> None:
        if callback is None:
            return
        try:
            callback(*args)
        except Exception:
            log.exception("notify.callback_failed", extra={"event": "notify.callback_failed"})
