"""The statements across tenants run on the driver's connection with `$n` placeholders (`tenant_parts.run`).

`numbered` turns their `%(name)s` placeholders into PostgreSQL's own: a name met again keeps
its number (the statements name `%(now)s` once per tenant), `%%` is a percent sign, and only
the values the text names are sent. `run` must behave as `exec_driver_sql` did in the caller's
transaction: the same rows and types, its writes rolled back with the transaction, a failure
raised, listeners of the connection's statements told, and a broken connection not handed out again.
"""

from __future__ import annotations

from datetime import datetime, timezone

import psycopg
import pytest
from hypothesis import given, strategies as st
from sqlalchemy import event, text

from almanac.db import Database
from almanac.platform.store.due_index.tenant_parts import numbered, run

NAMES = st.lists(st.sampled_from(["a", "b", "now", "ids0", "x_1"]), min_size=1, max_size=12)


def test_repeated_names_keep_their_number_and_unused_values_are_not_sent() -> None:
    sql, values = numbered("SELECT %(b)s, %(a)s, %(b)s, 100 %% 7", {"a": 1, "b": 2, "unused": 3})
    assert sql == "SELECT $1, $2, $1, 100 % 7"
    assert values == [2, 1]


@given(NAMES)
def test_each_placeholder_becomes_the_number_of_its_name_s_first_place(names: list[str]) -> None:
    params = {name: f"value of {name}" for name in ["a", "b", "now", "ids0", "x_1"]}
    sql, values = numbered(" , ".join(f"%({name})s" for name in names), params)
    numbers = [int(part.strip()[1:]) for part in sql.split(",")]
    assert [values[n - 1] for n in numbers] == [params[name] for name in names]
    assert len(values) == len(set(names))


def test_a_missing_value_is_an_error_before_anything_is_sent() -> None:
    with pytest.raises(KeyError):
        numbered("SELECT %(absent)s", {})


def test_rows_and_types_are_as_the_driver_gives_them(pg: Database) -> None:
    at = datetime(2026, 11, 28, 1, 2, 3, 456789, tzinfo=timezone.utc)
    with pg.engine.connect() as conn:
        rows = run(conn, "SELECT %(n)s::int + 1, %(at)s::timestamptz, %(arr)s::int[], %(s)s::varchar",
                   {"n": "41", "at": at, "arr": "{1,NULL,3}", "s": "it's %(s)s"})
    assert rows == [(42, at, [1, None, 3], "it's %(s)s")]


def test_a_write_is_part_of_the_caller_s_transaction(pg: Database) -> None:
    with pg.engine.connect() as conn:
        conn.exec_driver_sql("CREATE TEMP TABLE t_run (v int)")
        conn.commit()
        with conn.begin() as tx:
            assert run(conn, "INSERT INTO t_run VALUES (%(v)s::int)", {"v": "7"}) == []
            assert conn.execute(text("SELECT count(*) FROM t_run")).scalar() == 1
            tx.rollback()
        assert conn.execute(text("SELECT count(*) FROM t_run")).scalar() == 0


def test_listeners_of_the_connection_s_statements_see_it(pg: Database) -> None:
    seen: list[str] = []

    def listen(conn, cursor, statement, parameters, context, executemany):  # type: ignore[no-untyped-def]
        seen.append(statement)

    event.listen(pg.engine, "before_cursor_execute", listen)
    try:
        with pg.engine.connect() as conn:
            run(conn, "SELECT %(a)s::int", {"a": "1"})
    finally:
        event.remove(pg.engine, "before_cursor_execute", listen)
    assert seen == ["SELECT $1::int"]


def test_a_failure_is_raised_and_the_transaction_can_be_rolled_back(pg: Database) -> None:
    with pg.engine.connect() as conn:
        with pytest.raises(psycopg.errors.DivisionByZero):
            with conn.begin():
                run(conn, "SELECT 1 / %(z)s::int", {"z": "0"})
        assert conn.execute(text("SELECT 1")).scalar() == 1


def test_a_connection_the_failure_broke_is_not_handed_out_again(pg: Database) -> None:
    with pg.engine.connect() as conn:
        pid = conn.execute(text("SELECT pg_backend_pid()")).scalar()
        with pg.engine.connect() as other:
            other.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": pid})
        with pytest.raises(psycopg.OperationalError):
            run(conn, "SELECT %(a)s::int", {"a": "1"})
        assert conn.invalidated
    with pg.engine.connect() as conn:  # a new one: it works
        assert run(conn, "SELECT %(a)s::int", {"a": "2"}) == [(2,)]
