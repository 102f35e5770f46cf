"""Which processes are alive, and the runs of one that died made due again at once.

Every process that claims runs has a tag (`store.claim.new_tag`: 8 hex digits), the first 8 characters
of every lease token it writes (`store.claim.lease_token`), so the attempts a process holds
are found by their token alone. A dead process is told from a slow or a waiting one by the
end of its session, never by time: a run that waits for a slot or runs long changes nothing
here, so waiting is not dying (SPEC section 11).

- PostgreSQL: a thread of its own holds a session-level advisory lock keyed by the tag
  (`LOCK_SPACE`, tag) on a connection of its own, outside the pool (like the LISTEN
  connection, it needs a direct session, not a transaction-mode pooler), and keeps the
  process's row in `worker_heartbeats`. Every `beat_s` it reads the rows whose lock no
  session holds (`pg_locks`): those processes were killed, ran out of memory, or lost their
  connection (the server ends a session whose client vanished; the keepalives below bound
  how long that takes when the network, not the process, went away). A row seen so for
  `grace_s` (a process whose connection blinked takes its lock again within it) is reaped
  by whoever deletes it, in the transaction that deletes it. A process whose own connection was
  lost reaps no one for `RECONNECT_GRACE_S` after it is back: a database restart or failover
  cut everyone off, and the others may take longer than the grace to reconnect.
- SQLite (one machine): each process holds `flock` on `<sqlite dir>/procs/<tag>.lock`; a
  file another process can lock belongs to a process that is gone. Looked at when the
  process starts and every `beat_s`: a process that starts again recovers what it held.

Reaping ends the dead process's running attempts' leases now and makes them due (`_REAP`), and
wakes every process (`TAKEN_OVER`, a NOTIFY with the commit): the next claim pass of any process,
room or not, takes them first and recovers them as lapsed (`TenantClaims._recover`: failed, and
retried if attempts remain) and clears their token, so a process that was only stopped can
never finish them (its record is fenced by the token). A stopped (SIGSTOP) process keeps its
session: its runs wait for their leases, which stay the last resort.
"""

from __future__ import annotations

import fcntl
import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Iterable
from datetime import datetime
from pathlib import Path
from typing import IO, Any, cast

from sqlalchemy import Table, bindparam, create_engine, delete, func, select, text, update
from sqlalchemy.engine import Connection
from sqlalchemy.sql.elements import BindParameter
from sqlalchemy.pool import NullPool

from almanac.db import Database
from almanac.platform.decisions.policies import REAPED_AHEAD
from almanac.platform.store.due_index.tenant_parts import chunks, schema_quoter
from almanac.platform.clock import Clock
from almanac.platform.store.coordination_models import TimerLease, WorkerHeartbeat
from almanac.platform.store.models import RUNNING, Occurrence, Run
from almanac.platform.notify import CHANNEL

log = logging.getLogger("almanac.liveness")

TAG_LEN = 8
OWNER_SHAPE = ":t[0-7][0-9a-f]{7}$"  # a `worker_heartbeats.owner` made by `owner_of` (a regular expression)
LOCK_SPACE = 0x616C6D61  # "alma": the first key of every process's advisory lock
# How often a process refreshes its row and looks for the dead: a death is told within the grace
# plus up to two beats (the first sighting, then the beat that ends the grace), so the beat is kept
# short beside the grace; each beat is two statements on the process's own connection.
BEAT_S = 0.1
# How long a process's lock stays missing before it is reaped: a session ends with its process at
# once, so this covers only a live process's liveness connection lost and made again (a wait of
# `RETRY_S` and a connect to a server that is up). A stopped or slow process keeps its session.
GRACE_S = 0.5
RETRY_S = 0.1
# After this process's own connection was lost and made again, it reaps no one for this long: what
# cut it off (a database restart, a failover, the network) most likely cut the others off too, and
# they may take longer than the grace to reconnect. A process that died meanwhile is reaped after it.
RECONNECT_GRACE_S = 10.0
# The liveness connection's own keepalives, server side too: a backend whose client vanished
# from the network (not closed: a cable, a VM paused) ends within about 5 s, and so does its lock.
_KEEPALIVE = dict(keepalives=1, keepalives_idle=2, keepalives_interval=1, keepalives_count=3)
_SERVER_KEEPALIVE = ("SET tcp_keepalives_idle = 2", "SET tcp_keepalives_interval = 1",
                     "SET tcp_keepalives_count = 3", "SET tcp_user_timeout = 5000")

H, L, O, R = (cast(Table, m.__table__) for m in (WorkerHeartbeat, TimerLease, Occurrence, Run))  # Core tables, typed


def owner_of(tag: str) -> str:
    """The process's row in `worker_heartbeats`: who and where it is, then `t` and its tag (the last 8 characters).

    The `t` tells it from an older version's row, which ends in a random id and holds no lock."""
    return f"{socket.gethostname()[:60]}:{os.getpid()}:t{tag}"


# The wake-up a reaping sends every process with its commit (NOTIFY; never a tenant's slug, which has
# no `*`): the others' timers claim the reaped runs at their next pass even with no room left, rather
# than once the runs they hold have drained.
TAKEN_OVER = "*taken-over"
_TAKEN_OVER = select(func.pg_notify(CHANNEL, TAKEN_OVER))

# The running attempts of a tag, in one tenant: found by their run rows (`ix_runs_status_id`), and
# only those whose lease has not ended already (those are due, and recovered, anyway). They were
# started once already: due `AHEAD` before the reaping, they come first in their tenant's ranking
# (priority aside), ahead of its work still waiting, rather than behind a backlog they had passed;
# other tenants keep their turns (the round robin ranks within each tenant). Only the pick's order
# reads `due_at`: misfire and expiry go by `scheduled_for`.
AHEAD = REAPED_AHEAD
_NOW: BindParameter[datetime] = bindparam("b_now")
_REAP = (update(O).where(
    O.c.id.in_(select(R.c.occurrence_id).where(R.c.status == RUNNING, R.c.lease_token.like(bindparam("b_like")))),
    O.c.status == RUNNING, O.c.lease_token.like(bindparam("b_like")), O.c.due_at > _NOW,
).values(due_at=bindparam("b_first"), lease_until=_NOW))


def reap(conn: Connection | None, slugs: Iterable[str], tag: str, now: datetime, *,
         sqlite_db: Database | None = None) -> list[str]:
    """End the leases of the running attempts claimed under `tag` at `now` and make them due (`_REAP`), in
    every tenant; the tenants that had some.

    PostgreSQL: on `conn`, in its transaction, one statement for up to `tenant_parts.TENANTS_PER_STATEMENT`
    tenants (`_reap_statement`): a statement a tenant was a round trip each, most of a second over
    100 tenants on a busy server, while the dead process's runs waited. SQLite (`sqlite_db`): a
    transaction per tenant file, `conn` unused.
    """
    if len(tag) != TAG_LEN or any(c not in "0123456789abcdef" for c in tag):
        raise ValueError("not a process tag")
    params = {"b_like": tag + "%", "b_now": now, "b_first": now - AHEAD}
    touched = []
    if sqlite_db is None:
        assert conn is not None
        schema = schema_quoter(conn)
        for part in chunks(sorted(slugs)):
            found = conn.execute(_reap_statement([schema(slug) for slug in part]), {**params, "b_running": RUNNING})
            touched += [part[i] for i, count in found if count]
        return touched
    for slug in sorted(slugs):
        with sqlite_db.tenant_connection(slug) as tenant_conn, tenant_conn.begin():
            if tenant_conn.execute(_REAP, params).rowcount:
                touched.append(slug)
    return touched


def _reap_statement(schemas: list[str]) -> Any:
    """`_REAP` in each of these (quoted) schemas, as one statement: (the schema's place, rows made due)."""
    parts = [f"p{i} AS (UPDATE {schema}.occurrences o SET due_at = :b_first, lease_until = :b_now "
             f"WHERE o.id IN (SELECT r.occurrence_id FROM {schema}.runs r WHERE r.status = :b_running "
             "AND r.lease_token LIKE :b_like) AND o.status = :b_running AND o.lease_token LIKE :b_like "
             "AND o.due_at > :b_now RETURNING 1)" for i, schema in enumerate(schemas)]
    counts = " UNION ALL ".join(f"SELECT {i}, count(*) FROM p{i}" for i in range(len(schemas)))
    return text(f"WITH {', '.join(parts)} {counts}")


class Liveness:
    """This process's sign of life, and the reaper of the processes that lost theirs (a thread of its own)."""

    def __init__(self, db: Database, tag: str, list_tenants: Callable[[], Iterable[str]], clock: Clock, *,
                 on_reaped: Callable[[list[str]], None] | None = None, beat_s: float = BEAT_S,
                 grace_s: float = GRACE_S, ttl_s: float = 10.0) -> None:
        self.db, self.tag, self.list_tenants, self.clock = db, tag, list_tenants, clock
        self.owner = owner_of(tag)
        self.on_reaped = on_reaped
        self.beat_s, self.grace_s, self.ttl_s = beat_s, grace_s, ttl_s
        self.alive = threading.Event()  # set while this process's lock is held
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._dead_since: dict[str, float] = {}  # owner -> when first seen without its lock (monotonic)
        self._quiet_until = 0.0  # reaps no one before this (monotonic): just (re)connected
        self._connections = 0
        self.reconnect_grace_s = RECONNECT_GRACE_S
        self._lockfile: IO[bytes] | None = None

    # -- life cycle -------------------------------------------------------------------

    def start(self) -> None:
        """Take this process's lock, reap what dead processes left (SQLite: at once), then watch in a thread."""
        if self._thread is not None:
            return
        self._stop.clear()
        if self.db.is_sqlite:  # a failure here leaves this process's runs, and the dead's, to their leases
            self._safely(self._hold_file)
            self._safely(self._check_files)
        self._thread = threading.Thread(target=self._run, name="almanac-liveness", daemon=True)
        self._thread.start()
        if not self.db.is_sqlite:
            self.alive.wait(5.0)  # claims are fenced anyway; this only spares a first pass without a lock

    def stop(self) -> None:
        """Release the lock (call after the timer stopped: until then others must see this process alive)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)
            self._thread = None
        if self._lockfile is not None:
            try:
                (self._procs() / f"{self.tag}.lock").unlink(missing_ok=True)
            finally:
                self._lockfile.close()
                self._lockfile = None

    def _run(self) -> None:
        if self.db.is_sqlite:
            while not self._stop.wait(self.beat_s):
                self._safely(self._check_files)
            return
        while not self._stop.is_set():
            try:
                self._session()
            except Exception as exc:
                self.alive.clear()
                log.warning("liveness.connection_lost", extra={"event": "liveness.connection_lost",
                                                               "error": type(exc).__name__}, exc_info=True)
                self._stop.wait(min(self.beat_s, RETRY_S))

    def _safely(self, step: Callable[[], Any]) -> None:
        try:
            step()
        except Exception:
            log.exception("liveness.check_failed", extra={"event": "liveness.check_failed"})

    # -- PostgreSQL ---------------------------------------------------------------------

    def _session(self) -> None:
        """Hold the lock on a connection of its own; beat and look for the dead until stopped or cut off."""
        engine = create_engine(self.db.url, poolclass=NullPool, connect_args={"connect_timeout": 5, **_KEEPALIVE})
        try:
            with engine.connect() as raw:
                self._hold(raw.execution_options(isolation_level="AUTOCOMMIT"))
        finally:
            engine.dispose()
        log.info("liveness.released", extra={"event": "liveness.released", "owner": self.owner})

    def _hold(self, conn: Connection) -> None:
        for statement in _SERVER_KEEPALIVE:
            conn.execute(text(statement))
        # Blocks only while a session of this very tag lingers (its half-open socket): ours again, soon free.
        conn.execute(text("SELECT pg_advisory_lock(:space, :key)"), {"space": LOCK_SPACE, "key": int(self.tag, 16)})
        quiet = self.grace_s if self._connections == 0 else max(self.grace_s, self.reconnect_grace_s)
        self._connections += 1
        self._quiet_until = time.monotonic() + quiet
        self._dead_since.clear()
        self.alive.set()
        try:
            while not self._stop.is_set():
                self.beat(conn)
                self._stop.wait(self.beat_s)
            conn.execute(delete(H).where(H.c.owner == self.owner))  # a clean stop: nothing for the others to reap
        finally:
            self.alive.clear()

    def beat(self, conn: Connection) -> list[str]:
        """Refresh this process's row; reap the processes dead for `grace_s`; the owners reaped."""
        conn.execute(_BEAT, {"owner": self.owner, "ttl": f"{self.ttl_s} seconds"})
        found = conn.execute(_DEAD, {"space": LOCK_SPACE, "me": self.owner, "shape": OWNER_SHAPE})
        dead = {row[0] for row in found}
        at = time.monotonic()
        self._dead_since = {owner: self._dead_since.get(owner, at) for owner in dead}
        if at < self._quiet_until:
            return []  # just (re)connected: the others may be reconnecting too
        reaped = []
        for owner in sorted(o for o, since in self._dead_since.items() if at - since >= self.grace_s):
            self._dead_since.pop(owner, None)  # reaped, or failed: seen dead again, it waits the grace again
            try:
                if self._reap_owner(owner):
                    reaped.append(owner)
            except Exception:
                log.exception("liveness.reap_failed", extra={"event": "liveness.reap_failed", "owner": owner})
        return reaped

    def _reap_owner(self, owner: str) -> bool:
        """Reap a dead process's runs and free its tenant leases, if no other process did first."""
        tag = owner[-TAG_LEN:]
        now = self.clock.now()
        with self.db.engine.connect() as conn, conn.begin():
            if conn.execute(delete(H).where(H.c.owner == owner).returning(H.c.owner)).first() is None:
                return False  # another process reaped it
            conn.execute(update(L).where(L.c.owner == owner).values(owner=None, token=None, expires_at=None))
            touched = reap(conn, self.list_tenants(), tag, now)
            if touched:
                conn.execute(_TAKEN_OVER)  # delivered with the commit, to this process's listener too
        self._reaped(tag, touched)
        return True

    def _reaped(self, tag: str, touched: list[str]) -> None:
        log.warning("liveness.reaped", extra={"event": "liveness.reaped", "tag": tag, "tenants": len(touched)})
        if touched and self.on_reaped is not None:
            try:
                self.on_reaped(touched)
            except Exception:
                log.exception("liveness.on_reaped_failed", extra={"event": "liveness.on_reaped_failed"})

    # -- SQLite ---------------------------------------------------------------------------

    def _procs(self) -> Path:
        return self.db.settings.sqlite_dir() / "procs"

    def _hold_file(self) -> None:
        """Lock `<tag>.lock`, made under another name and renamed once locked: never seen unlocked."""
        procs = self._procs()
        procs.mkdir(parents=True, exist_ok=True)
        staged = procs / f".{self.tag}.new"
        handle = staged.open("wb")
        fcntl.flock(handle, fcntl.LOCK_EX)
        staged.rename(procs / f"{self.tag}.lock")
        self._lockfile = handle

    def _check_files(self) -> list[str]:
        """Reap the tags whose lock file no process holds; the tags reaped."""
        reaped = []
        for path in sorted(self._procs().glob("*.lock")):
            tag = path.stem
            if tag == self.tag or len(tag) != TAG_LEN:
                continue
            try:
                handle = path.open("rb")
            except FileNotFoundError:
                continue  # another process reaped it meanwhile
            with handle:
                try:
                    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    continue  # its process lives
                touched = reap(None, self.list_tenants(), tag, self.clock.now(), sqlite_db=self.db)
                path.unlink(missing_ok=True)
            reaped.append(tag)
            self._reaped(tag, touched)
        return reaped


_BEAT = text(
    "INSERT INTO worker_heartbeats (owner, started_at, seen_at, expires_at) "
    "VALUES (:owner, now(), now(), now() + CAST(:ttl AS interval)) "
    "ON CONFLICT (owner) DO UPDATE SET seen_at = now(), expires_at = now() + CAST(:ttl AS interval)")
# The processes whose row stays but whose lock no session holds. Rows of another shape (a process
# of an older version, which holds no lock) are never taken for dead.
_DEAD = text(
    "SELECT h.owner FROM worker_heartbeats h WHERE h.owner <> :me AND h.owner ~ :shape "
    "AND NOT EXISTS (SELECT 1 FROM pg_locks l WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 2 "
    "AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database()) "
    "AND CAST(l.classid AS bigint) = :space "
    "AND CAST(l.objid AS bigint) = CAST(CAST('x' || lpad(right(h.owner, 8), 16, '0') AS bit(64)) AS bigint))")
