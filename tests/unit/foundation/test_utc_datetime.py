"""UTCDateTime on SQLite: its fused processors write and read exactly what SQLAlchemy's would."""

from __future__ import annotations

import random
from datetime import datetime, timedelta, timezone

import pytest
from sqlalchemy import Column, DateTime, Integer, MetaData, Table, create_engine, select, text
from sqlalchemy.dialects import sqlite
from sqlalchemy.exc import StatementError

from almanac.db import UTCDateTime


def test_times_are_stored_as_sqlalchemys_sqlite_datetime_text() -> None:
    dialect = sqlite.dialect()
    ours = UTCDateTime().dialect_impl(dialect).bind_processor(dialect)
    theirs = sqlite.DATETIME().bind_processor(dialect)
    rnd = random.Random(5)
    for _ in range(5000):
        when = datetime(1, 1, 2, tzinfo=timezone.utc) + timedelta(
            seconds=rnd.randrange(0, 315_000_000_000), microseconds=rnd.choice([0, 1, 999_999, rnd.randrange(10**6)]))
        local = when.astimezone(timezone(timedelta(hours=rnd.randrange(-12, 13)))) if 1 < when.year < 9999 else when
        assert ours(local) == theirs(when.replace(tzinfo=None))


def test_times_come_back_aware_utc_and_naive_ones_are_refused() -> None:
    engine = create_engine("sqlite://")
    table = Table("t", MetaData(), Column("id", Integer, primary_key=True), Column("at", UTCDateTime()),
                  Column("plain", DateTime()))
    table.metadata.create_all(engine)
    when = datetime(2026, 3, 29, 1, 30, 0, 7, tzinfo=timezone(timedelta(hours=2)))
    with engine.begin() as conn:
        conn.execute(table.insert(), [{"at": when, "plain": when.astimezone(timezone.utc).replace(tzinfo=None)}])
        stored = conn.execute(text("SELECT at, plain FROM t")).one()
        assert stored.at == stored.plain == "2026-03-28 23:30:00.000007"
        back = conn.execute(select(table.c.at)).scalar_one()
        assert back == when and back.tzinfo is timezone.utc
        conn.execute(text("INSERT INTO t (at) VALUES ('2026-01-01 09:00:00')"))  # written by hand, no fraction
        assert conn.execute(select(table.c.at).where(table.c.id == 2)).scalar_one() == datetime(
            2026, 1, 1, 9, tzinfo=timezone.utc)
        conn.execute(text("INSERT INTO t (at) VALUES ('2026-01-01 09:00:00+02:00')"))  # an offset: converted
        assert conn.execute(select(table.c.at).where(table.c.id == 3)).scalar_one() == datetime(
            2026, 1, 1, 7, tzinfo=timezone.utc)
        with pytest.raises(StatementError, match="naive datetime"):
            conn.execute(table.insert(), [{"at": datetime(2026, 1, 1)}])
