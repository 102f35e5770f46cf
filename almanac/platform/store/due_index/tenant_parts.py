"""What the scheduler's statements across tenants share (PostgreSQL): how many tenants one takes, and their schemas.

`due_index.reads`, `due_index.writes` and `due_index.record` each write one statement
for many tenants, a part per tenant naming its schema: `schema_for` of a validated slug,
quoted by the dialect (values are always parameters). A statement takes at most
`TENANTS_PER_STATEMENT` tenants, which bounds its text and its plan.

Their writes of tenants' occurrences move the shared due index themselves, for every tenant
of the statement at once (`index_moves`: a function called on the writes' RETURNING rows),
inside `due_index_by_statement`, which turns the tenants' due-index triggers off for just
those statements (migration t0019): run once per row and compiled again per tenant's table
in every backend, the triggers were a third of a claim statement's time.

Their passes plan for lookups by key (`plan_for_key_lookups`): they fetch a few rows of each
tenant by id, and with the server's default costs and a tenant's tables not yet analyzed (as
t0018 leaves them for their first thousands of changes) the planner read whole tables instead.

Their row values go as arrays, one parameter a column, each given as the text of a
PostgreSQL array (`array_literal`) that the statement casts (`%(x)s::int[]`): psycopg
dumps a list element by element in Python, which was a sixth of a worker's CPU in a
burst (2.9 ms for the 225 arrays of one record statement over 15 tenants, 1.0 ms this
way; PostgreSQL reads the same text either way).

They run through `run`, on the driver's connection with PostgreSQL's own `$n` placeholders: their
texts are long and never the same twice, and psycopg's conversion of `%(name)s` placeholders,
uncached for such texts, and SQLAlchemy's result set-up were about a sixth of a worker's CPU in a
burst (docs/decisions/0008-statements-across-tenants-raw.md).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import Any, TypeVar

import psycopg

from almanac.db import met_schema, schema_for
from almanac.platform.store.sql.functions import DUE_INDEX_MOVED

T = TypeVar("T")

TENANTS_PER_STATEMENT = 64  # a pass takes at most 16 rows a tenant, so it rarely spans more


def chunks(parts: Sequence[T]) -> Iterator[Sequence[T]]:
    """`parts` (one per tenant) in statements' worth, in order."""
    for start in range(0, len(parts), TENANTS_PER_STATEMENT):
        yield parts[start:start + TENANTS_PER_STATEMENT]


def schema_quoter(conn: Any) -> Callable[[str], str]:
    """A tenant slug -> its schema's name as SQL, quoted by `conn`'s dialect (and counted as met by `conn`)."""
    quote = conn.dialect.identifier_preparer.quote_schema

    def schema(slug: str) -> str:
        name = schema_for(slug)
        met_schema(conn, name)
        return quote(name)
    return schema


_PLACEHOLDER = re.compile(r"%\((\w+)\)s|%%")


def numbered(sql: str, params: dict[str, Any]) -> tuple[str, list[Any]]:
    """`sql` with its `%(name)s` placeholders as PostgreSQL's `$n` (a name met again keeps its number,
    `%%` becomes `%`), and the values in that order. One regular-expression pass, in C."""
    order: dict[str, int] = {}

    def number(match: re.Match[str]) -> str:
        name = match.group(1)
        if name is None:
            return "%"
        return f"${order.setdefault(name, len(order) + 1)}"

    text = _PLACEHOLDER.sub(number, sql)
    return text, [params[name] for name in order]


def run(conn: Any, sql: str, params: dict[str, Any]) -> list[tuple[Any, ...]]:
    """Execute one statement with `%(name)s` placeholders in `conn`'s transaction; its rows (none for a write).

    On the psycopg connection under `conn` (a SQLAlchemy connection), with a `RawCursor`: the same
    server-side parameters and types as `conn.exec_driver_sql`, without psycopg's conversion of the
    text or SQLAlchemy's result objects. Its `before_cursor_execute` listeners are told of the
    statement, as for the connection's own (they cannot rewrite it here). A failure is raised as
    psycopg raises it; when it broke the connection, `conn` is invalidated first, so that its pool
    does not hand it out again.
    """
    text, values = numbered(sql, params)
    raw = conn.connection.driver_connection
    try:
        with psycopg.RawCursor(raw) as cur:
            for listener in conn.dispatch.before_cursor_execute:  # what watches the connection's SQL sees this too
                listener(conn, cur, text, values, None, False)
            cur.execute(text, values)
            return cur.fetchall() if cur.description is not None else []
    except psycopg.Error:
        if raw.broken or raw.closed:
            conn.invalidate()
        raise


# The setting the tenants' due-index triggers test (t0019_due_index_by_statement): 'on' turns them off.
BY_STATEMENT = "almanac.due_index_by_statement"


@contextmanager
def due_index_by_statement(conn: Any) -> Iterator[None]:
    """Within: `conn`'s statements move the due index themselves (`index_moves`); the triggers skip.

    Set for the transaction (`set_config(..., true)`) and unset when the block ends. On an
    exception it stays set: the caller must roll the transaction back, which unsets it (a
    statement that failed leaves the transaction unable to run the unsetting one anyway).
    """
    run(conn, "SELECT set_config(%(name)s, 'on', true)", {"name": BY_STATEMENT})
    yield
    run(conn, "SELECT set_config(%(name)s, '', true)", {"name": BY_STATEMENT})


# What `plan_for_key_lookups` sets: PostgreSQL's documented value for data in memory or on SSD.
RANDOM_PAGE_COST = "1.1"


def plan_for_key_lookups(conn: Any) -> None:
    """For the rest of `conn`'s transaction, a page read by index costs the planner about a sequential one.

    The passes look up a few rows of each tenant by key (`id = ANY(...)`). With the default
    `random_page_cost` (4, for spinning disks) and a tenant of 1,000 schedules whose tables were
    never analyzed, eight index lookups looked dearer than reading the whole table: the schedules'
    read, the claim's writes and the record scanned all 1,000 rows, a third of the executor's time
    in a burst (docs/decisions/0019-plans-for-lookups-by-key.md). Set for the transaction only
    (`set_config(..., true)`): every other statement keeps the server's settings.
    """
    run(conn, "SELECT set_config('random_page_cost', %(cost)s, true)", {"cost": RANDOM_PAGE_COST})


def index_moves(moved: Sequence[str]) -> str:
    """The CTE `ixm` that makes the shared due index follow a statement's writes of occurrences.

    `moved`: SELECTs of (slug, id, due_at, priority) of the occurrences written (claimed,
    released, requeued, new); each one's entry is replaced by one at its new due time, or
    none when that is NULL (`sql.functions.DUE_INDEX_MOVED`). `ixm` is one
    row, and only runs if the statement's result reads it; it runs after those writes, since
    its input is their RETURNING rows.
    """
    rows = " UNION ALL ".join(moved)
    call = DUE_INDEX_MOVED.call("", {"p_slugs": "array_agg(slug)", "p_ids": "array_agg(id)",
                                     "p_dues": "array_agg(due_at)", "p_priorities": "array_agg(priority)"})
    return f"ixm AS (SELECT {call} AS written FROM ({rows}) AS m(slug, id, due_at, priority))"


def per_tenant_calls(calls: Sequence[str], moved: str) -> str:
    """The CTEs `w`, the rows of `calls` (SELECTs of each tenant's function, t0020 / t0021), and `ixm`,
    the due index moved by them (`index_moves`); `moved` selects (slug, id, due_at, priority) of `w`.

    `w` is MATERIALIZED so that each call runs once, though both `ixm` and the result read its rows.
    """
    written = "w AS MATERIALIZED (" + " UNION ALL ".join(calls) + ")"
    return written + ",\n" + index_moves([f"SELECT {moved} FROM w"])


def _quoted(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError(f"a text array takes str, not {type(value).__name__}")
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _timestamp(value: Any) -> str:
    if not isinstance(value, datetime):
        raise TypeError(f"a timestamp array takes datetime, not {type(value).__name__}")
    return '"' + value.isoformat() + '"'


def array_literal(values: Iterable[Any], kind: str) -> str:
    """`values` as the text of a PostgreSQL array of `kind` ("int", "timestamptz", or a text type), None as NULL.

    Inside double quotes only `\\` and `"` are special (PostgreSQL's array input), so any text
    round-trips; ints are written by `int`, so nothing but digits and a sign reaches the text.
    """
    if kind == "int":
        return "{" + ",".join(["NULL" if v is None else str(int(v)) for v in values]) + "}"
    element = _timestamp if kind == "timestamptz" else _quoted
    # Written once per distinct value: a pass's runs share a few instants (now, the lease's end, the
    # burst's time), and `isoformat` was 5 % of a worker's GIL samples in a burst. Equal values are
    # written as the first of them was (the same instant, the same text), which alone is checked.
    written: dict[Any, str] = {}
    texts = []
    for v in values:
        if v is None:
            texts.append("NULL")
            continue
        text = written.get(v)
        if text is None:
            text = written[v] = element(v)
        texts.append(text)
    return "{" + ",".join(texts) + "}"
