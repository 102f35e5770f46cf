"""PostgreSQL: the arrays the statements across tenants send as text (`tenant_parts.array_literal`) read back as sent.

A run's output, logs and error are the tenant's own text, so the literal must survive any
string PostgreSQL can store: quotes, backslashes, braces, commas, the word NULL, blanks,
other scripts. Ints and timestamps (with their microseconds and offset) must too.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from almanac.db import Database
from almanac.platform.store.due_index.tenant_parts import _quoted, _timestamp, array_literal

TEXT = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=40)
TRICKY = ['', ' ', 'NULL', 'null', '"', '\\', '\\"', '{', '}', ',', '{a,b}', 'a"b\\c', ' padded ', 'ünïcødé ✓', '\t\n']


def _read(database: Database, literal: str, kind: str) -> list:
    with database.engine.connect() as conn:
        return conn.exec_driver_sql(f"SELECT %(a)s::{kind}[]", {"a": literal}).scalar_one()


def test_tricky_texts_and_nulls_read_back_as_sent(pg: Database) -> None:
    values = [*TRICKY, None]
    assert _read(pg, array_literal(values, "text"), "text") == values
    assert _read(pg, array_literal(values, "varchar"), "varchar") == values


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(values=st.lists(st.one_of(st.none(), TEXT), max_size=12))
def test_any_text_reads_back_as_sent(pg: Database, values: list) -> None:
    assert _read(pg, array_literal(values, "text"), "text") == values


def test_ints_and_timestamps_read_back_as_sent(pg: Database) -> None:
    ints = [0, -7, 2**31 - 1, None, 42]
    assert _read(pg, array_literal(ints, "int"), "int") == ints
    at = datetime(2026, 3, 29, 1, 30, 0, 123456, tzinfo=timezone.utc)
    times = [at, None, at.astimezone(timezone(timedelta(hours=-5, minutes=-30)))]
    assert _read(pg, array_literal(times, "timestamptz"), "timestamptz") == times
    assert _read(pg, array_literal([], "int"), "int") == []


def test_a_value_of_the_wrong_kind_is_refused_not_written_as_something_else() -> None:
    with pytest.raises(TypeError):
        array_literal([1], "text")
    with pytest.raises(TypeError):
        array_literal(["2026-01-01"], "timestamptz")
    with pytest.raises(ValueError):
        array_literal(["1); DROP TABLE runs; --"], "int")


INSTANTS = [datetime(2026, 3, 29, 1, 30, 0, 123456, tzinfo=timezone.utc) + timedelta(seconds=s) for s in (0, 1, 3600)]


@settings(deadline=None)  # pure and quick: a loaded CI box must not fail it on time
@given(texts=st.lists(st.one_of(st.none(), st.sampled_from([*TRICKY, "x"])), max_size=20),
       times=st.lists(st.one_of(st.none(), st.sampled_from(INSTANTS)), max_size=20))
def test_a_value_met_again_is_written_as_the_first_time(texts: list, times: list) -> None:
    """`array_literal` writes each distinct value once and reuses its text: the same literal as value by value."""
    def one_by_one(values: list, element: Callable[[Any], str]) -> str:
        return "{" + ",".join("NULL" if v is None else element(v) for v in values) + "}"

    assert array_literal(texts, "text") == one_by_one(texts, _quoted)
    assert array_literal(times, "timestamptz") == one_by_one(times, _timestamp)


def test_a_value_of_the_wrong_kind_after_others_is_still_refused() -> None:
    with pytest.raises(TypeError):
        array_literal(["a", "a", 1], "text")
    with pytest.raises(TypeError):
        array_literal([INSTANTS[0], INSTANTS[0], "2026-01-01"], "timestamptz")
    with pytest.raises(TypeError):
        array_literal(["a", ["a"]], "text")  # not even hashable
