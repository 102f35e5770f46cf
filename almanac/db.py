"""Declarative bases, engine and session factories, and the tenant schema mapping.

Shared tables (tenants, users, memberships, tokens) live in the default
schema. Every per-tenant table is declared in the placeholder schema
`TENANT_SCHEMA`; a tenant session translates that placeholder to the
tenant's real schema with SQLAlchemy's `schema_translate_map`. That map is
the one mechanism that reaches a tenant's data: no SQL is ever built from a
tenant's name.

On PostgreSQL the real schema is a schema. On SQLite it is a database file
per tenant (`<var>/tenants/<slug>.db`), ATTACHed to the connection under
the schema name before the transaction begins.
"""

from __future__ import annotations

import logging
import os
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from datetime import datetime, timezone

from sqlalchemy import DateTime, Engine, MetaData, TypeDecorator, create_engine, event
from sqlalchemy.exc import DisconnectionError
from sqlalchemy.orm import DeclarativeBase, Session, sessionmaker
from sqlalchemy.pool import NullPool

from almanac.errors import ValidationError
from almanac.settings import Settings

log = logging.getLogger(__name__)

TENANT_SCHEMA = "tenant"
SLUG_PATTERN = re.compile(r"^[a-z][a-z0-9]*(?:-[a-z0-9]+)*$")
SLUG_MAX = 40
# SQLite allows 10 attached files per connection by default; keep room for one more.
_MAX_ATTACHED = 8
# An execution option: the connection's transactions only read (on SQLite they begin DEFERRED).
READ_ONLY = "almanac_read_only"

NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

# A table keyed by one integer column that the database numbers: on SQLite it is AUTOINCREMENT, so that
# a new row never takes a deleted row's id (plain SQLite gives max(id) + 1); PostgreSQL's sequences never
# go back anyway. Each such model passes this in its `__table_args__`.
IDS_NEVER_REUSED = {"sqlite_autoincrement": True}


class UTCDateTime(TypeDecorator[datetime]):
    """Stores UTC; always hands back an aware datetime (SQLite keeps no zone)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: Any, dialect: Any) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime given to a UTC column")
        value = value.astimezone(timezone.utc)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: Any, dialect: Any) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=timezone.utc)
        return value.astimezone(timezone.utc)

    # On SQLite every bound or fetched time went through two processors (ours, then SQLite's
    # text format or parse); the scheduler binds ~10 per run. These fuse the two into one
    # function with the same result: SQLite's "YYYY-MM-DD HH:MM:SS.ffffff", read back aware.

    def bind_processor(self, dialect: Any) -> Any:
        if dialect.name != "sqlite":
            return super().bind_processor(dialect)
        utc = timezone.utc

        def process(value: Any) -> str | None:
            if value is None:
                return None
            if value.tzinfo is not utc:
                if value.tzinfo is None:
                    raise ValueError("naive datetime given to a UTC column")
                value = value.astimezone(utc)
            # "YYYY-MM-DD HH:MM:SS.ffffff+00:00" less its offset (cheaper than replace(tzinfo=None)).
            return value.isoformat(" ", "microseconds")[:26]

        return process

    def result_processor(self, dialect: Any, coltype: Any) -> Any:
        parse = self.impl_instance.result_processor(dialect, coltype)
        if dialect.name != "sqlite" or parse is None:
            return super().result_processor(dialect, coltype)
        utc, fromisoformat = timezone.utc, datetime.fromisoformat

        def process(value: Any) -> datetime | None:
            if value is None:
                return None
            try:
                return fromisoformat(value + "+00:00")  # our naive UTC text, read as aware UTC in one step
            except (TypeError, ValueError):  # anything else SQLite may hold: SQLAlchemy's parse, then ours
                value = parse(value)
                return value.replace(tzinfo=utc) if value.tzinfo is None else value.astimezone(utc)

        return process


class SharedBase(DeclarativeBase):
    """Tables of the shared schema."""

    metadata = MetaData(naming_convention=NAMING_CONVENTION)


class TenantBase(DeclarativeBase):
    """Tables that every tenant has in its own schema."""

    metadata = MetaData(schema=TENANT_SCHEMA, naming_convention=NAMING_CONVENTION)


def validate_slug(slug: str) -> str:
    """Return the slug if it is lowercase letters, digits and single dashes; else raise."""
    if not isinstance(slug, str) or not (2 <= len(slug) <= SLUG_MAX) or not SLUG_PATTERN.match(slug):
        raise ValidationError(
            f"Tenant slug {slug!r} must be 2-{SLUG_MAX} lowercase letters, digits and single dashes, "
            "starting with a letter."
        )
    return slug


def schema_for(slug: str) -> str:
    """The real schema name of a tenant. Injective because slugs never hold underscores."""
    return "t_" + validate_slug(slug).replace("-", "_")


def upsert_insert(dialect_name: str) -> Any:
    """The backend's `insert` construct, the one with ON CONFLICT (PostgreSQL or SQLite)."""
    if dialect_name == "postgresql":
        from sqlalchemy.dialects.postgresql import insert
    else:
        from sqlalchemy.dialects.sqlite import insert
    return insert


def insert_ignore(session: Session, table: Any, values: dict[str, Any]) -> bool:
    """INSERT ... ON CONFLICT DO NOTHING, on SQLite and PostgreSQL alike; True if a row was added."""
    insert = upsert_insert(session.get_bind().dialect.name)
    # rowcount is not reliable here (psycopg reports -1): ask for the new key instead.
    stmt = insert(table).values(**values).on_conflict_do_nothing().returning(*table.primary_key.columns)
    return session.execute(stmt).first() is not None


class Database:
    """The engine and session factories of one process, built from settings."""

    def __init__(self, settings: Settings, *, pool: str | None = None) -> None:
        self.settings = settings
        self.url = settings.database_url
        self.is_sqlite = self.url.startswith("sqlite")
        # Resolved once: a tenant session on SQLite needs the path, and resolving it per session showed up in profiles.
        self._tenant_dir = settings.sqlite_dir() / "tenants" if self.is_sqlite else None
        self.engine = self._build_engine(pool)
        # The claim and record lanes (`platform.lanes`): PostgreSQL only, and not for a one-shot command's null pool.
        lanes = settings.pg_lanes if not self.is_sqlite and pool != "null" else 1
        self.lanes: list[Engine] = [self._lane_engine() for _ in range(lanes)] if lanes > 1 else []
        self._sessions = sessionmaker(bind=self.engine, expire_on_commit=False)

    # -- engine -----------------------------------------------------------------

    def _build_engine(self, pool: str | None) -> Engine:
        kwargs: dict[str, Any] = {"future": True}
        if self.is_sqlite:
            _private_dir(self.settings.sqlite_dir())
            _private_dir(self.tenant_dir())
            main = self.url.split("///", 1)[1] if "///" in self.url else ""
            if main and main != ":memory:":
                _private_file(Path(main))
            kwargs["connect_args"] = {"check_same_thread": False, "timeout": 30}
            if pool == "null":
                kwargs["poolclass"] = NullPool
            engine = create_engine(self.url, **kwargs)
            _install_sqlite_hooks(engine)
            return engine
        kwargs.update(pool_size=self.settings.pool_size, max_overflow=self.settings.pool_size)
        if pool == "null":
            kwargs = {"future": True, "poolclass": NullPool}
        engine = create_engine(self.url, **kwargs)
        _install_idle_ping(engine)
        _install_retirement(engine, self.settings.pg_tenants_per_connection)
        return engine

    def _lane_engine(self) -> Engine:
        """One lane's connection. It serves a fixed share of the tenants, so its backend's catalog
        cache holds only theirs: it is counted (`tenants_met`) but never retired for it."""
        engine = create_engine(self.url, future=True, pool_size=1, max_overflow=0)
        _install_idle_ping(engine)
        _install_retirement(engine, None)
        return engine

    def tenant_dir(self) -> Path:
        return self._tenant_dir if self._tenant_dir is not None else self.settings.sqlite_dir() / "tenants"

    def tenant_file(self, slug: str) -> Path:
        validate_slug(slug)
        return self.tenant_dir() / f"{slug}.db"

    def dispose(self) -> None:
        self.engine.dispose()
        for lane in self.lanes:
            lane.dispose()

    # -- sessions ---------------------------------------------------------------

    @contextmanager
    def shared_session(self, *, read_only: bool = False) -> Iterator[Session]:
        """A unit of work on the shared schema: commits on success, rolls back on error.

        `read_only`: it only reads, so on SQLite it waits for no writer (`READ_ONLY`)."""
        if read_only:
            with self.engine.connect() as conn:
                yield from _unit_of_work(conn.execution_options(**{READ_ONLY: True}))
            return
        session = self._sessions()
        try:
            yield session
            session.commit()
        except BaseException:
            session.rollback()
            raise
        finally:
            session.close()

    @contextmanager
    def tenant_connection(self, slug: str, *, read_only: bool = False) -> Iterator[Any]:
        """A connection whose `tenant` schema is this tenant's schema (and the shared one as default).

        `read_only`: its transactions only read, so on SQLite they wait for no writer (`READ_ONLY`)."""
        schema = schema_for(slug)
        with self.engine.connect() as conn:
            if self.is_sqlite:
                _attach(conn, schema, self.tenant_file(slug))
            yield conn.execution_options(schema_translate_map={TENANT_SCHEMA: schema}, **{READ_ONLY: read_only})

    @contextmanager
    def tenant_session(self, slug: str, *, read_only: bool = False) -> Iterator[Session]:
        """A unit of work in one tenant's schema (shared tables remain reachable); `read_only` as above."""
        with self.tenant_connection(slug, read_only=read_only) as conn:
            # `tenant`: e.g. for the tenant's quotas, read in the same transaction
            yield from _unit_of_work(conn, tenant=slug)


def _unit_of_work(conn: Any, **info: Any) -> Iterator[Session]:
    """A session on `conn` that commits on success and rolls back on error (`info`: its `Session.info`)."""
    session = Session(bind=conn, expire_on_commit=False, join_transaction_mode="create_savepoint")
    session.info.update(info)
    try:
        yield session
        session.commit()
        if conn.in_transaction():
            conn.commit()
    except BaseException:
        session.rollback()
        if conn.in_transaction():
            conn.rollback()
        raise
    finally:
        session.close()


# A pooled PostgreSQL connection idle longer than this is pinged before use. SQLAlchemy's
# pool_pre_ping pings at every checkout: a round trip that was a fifth of a single PUT's time.
# A connection checked in a moment ago was alive a moment ago; one that sat in the
# pool across a database restart or a dropped socket is found dead by the ping and replaced.
PING_IDLE_S = 1.0


def _ping(dbapi_conn: Any) -> None:
    """`SELECT 1` in autocommit, as SQLAlchemy's own ping does: the connection is handed out idle, not
    inside a transaction the ping began (a caller that asks for AUTOCOMMIT could not have it then)."""
    before = dbapi_conn.autocommit
    dbapi_conn.autocommit = True
    cursor = dbapi_conn.cursor()
    try:
        cursor.execute("SELECT 1")
    finally:
        cursor.close()
        dbapi_conn.autocommit = before


def _install_idle_ping(engine: Engine) -> None:
    """Ping a pooled connection at checkout only if it sat idle past `PING_IDLE_S` (SQLAlchemy's
    documented custom pessimistic check: a `DisconnectionError` makes the pool try a fresh one)."""

    @event.listens_for(engine, "checkin")
    def _on_checkin(_dbapi_conn: Any, record: Any) -> None:
        record.info["almanac_idle_since"] = time.monotonic()

    @event.listens_for(engine, "checkout")
    def _on_checkout(dbapi_conn: Any, record: Any, _proxy: Any) -> None:
        since = record.info.get("almanac_idle_since")
        if since is None or time.monotonic() - since < PING_IDLE_S:
            return  # new, or in use a moment ago
        try:
            _ping(dbapi_conn)
        except Exception as exc:
            raise DisconnectionError(f"a pooled connection failed its ping: {type(exc).__name__}") from exc


# PostgreSQL keeps a catalog cache entry for every table and index a backend has opened, and
# never evicts them: ~150 kB a tenant for the scheduler's tables (README, Sizing). The pool hands
# its connections out in turn, so each would in time hold every busy tenant's entries (143 MB at
# 1,000 tenants, measured). So each pooled connection counts the tenant schemas it named;
# past the setting it is closed when next handed out and a fresh backend takes its place. That
# bounds a backend's catalog memory by the setting plus what one checkout names.
#
# A connection names a tenant's schema through its `schema_translate_map` (tenant sessions, the
# claim pass's sessions: counted by the engine's event, below), or in SQL text it writes itself
# (the statements across tenants, the new-tenant replay: these call `met_schema`).
TENANTS_MET = "almanac_tenants_met"


def met_schema(conn: Any, schema: str) -> None:
    """Note that `conn` (a SQLAlchemy connection) names this tenant schema in SQL of its own."""
    met = conn.info.get(TENANTS_MET)
    if met is None:
        met = conn.info[TENANTS_MET] = set()
    met.add(schema)


def tenants_met(info: dict[str, Any]) -> int:
    """How many tenant schemas the connection whose `info` this is has named since it was opened
    (a SQLAlchemy connection's `info`, or its pool record's: the same dictionary)."""
    return len(info.get(TENANTS_MET, ()))


def _install_retirement(engine: Engine, tenants_per_connection: int | None) -> None:
    """Count the schemas each connection's translate maps name; at checkin, a connection past
    `tenants_per_connection` (None: never) is soft-invalidated: SQLAlchemy closes it and opens a new
    one at its next checkout (its `info`, with the count, starts empty)."""

    @event.listens_for(engine, "set_connection_execution_options")
    def _on_options(conn: Any, opts: dict[str, Any]) -> None:
        for schema in (opts.get("schema_translate_map") or {}).values():
            if schema is not None:
                met_schema(conn, schema)

    @event.listens_for(engine, "checkin")
    def _on_checkin(dbapi_conn: Any, record: Any) -> None:
        met = tenants_met(record.info)
        if dbapi_conn is not None and tenants_per_connection is not None and met > tenants_per_connection:
            record.invalidate(soft=True)
            # So that an operator sees how often it happens, and can weigh the setting (README, Sizing).
            log.info("db.connection_retired", extra={"event": "db.connection_retired", "tenants_met": met,
                                                     "limit": tenants_per_connection})


def _install_sqlite_hooks(engine: Engine) -> None:
    """WAL, a busy timeout, foreign keys, and BEGIN IMMEDIATE so writers queue instead of failing."""

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.isolation_level = None  # we emit BEGIN ourselves (SQLAlchemy's pysqlite recipe)
        cursor = dbapi_conn.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA busy_timeout=30000")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Any) -> None:
        # BEGIN IMMEDIATE takes the write lock of every file attached to the connection (the shared
        # one and each tenant's it met): a read would queue behind any tenant's writer. In WAL mode a
        # deferred reader takes no lock and sees the last commit.
        conn.exec_driver_sql("BEGIN" if conn.get_execution_options().get(READ_ONLY) else "BEGIN IMMEDIATE")


def _attach(conn: Any, schema: str, path: Path) -> None:
    """ATTACH the tenant file under its schema name, outside any transaction.

    What a pooled connection has attached is remembered in its `info`, so the common case
    (this tenant is already attached) costs no statement at all.
    """
    attached: set[str] = conn.connection.info.setdefault("almanac_attached", set())
    if schema in attached:
        return
    dbapi = conn.connection.dbapi_connection
    if len(attached) >= _MAX_ATTACHED:
        for name in sorted(attached):
            dbapi.execute(f'DETACH DATABASE "{name}"')
        attached.clear()
    _private_file(path)
    # `schema` comes from schema_for(): validated, only [a-z0-9_]; the path is a bound parameter.
    dbapi.execute(f'ATTACH DATABASE ? AS "{schema}"', (str(path),))
    dbapi.execute(f'PRAGMA "{schema}".journal_mode=WAL')
    dbapi.execute(f'PRAGMA "{schema}".synchronous=NORMAL')
    attached.add(schema)


def _private_dir(path: Path) -> None:
    """A folder of database files, made 0700 when it is made here (an operator's own folder is left as it is)."""
    path.mkdir(parents=True, exist_ok=True, mode=0o700)


def _private_file(path: Path) -> None:
    """Create a missing SQLite file empty and 0600 before SQLite opens it: SQLite would make it 0644
    (under the usual umask) and gives its -wal and -shm files the database file's own mode."""
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    except FileExistsError:
        pass
