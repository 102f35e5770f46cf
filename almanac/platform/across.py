"""What the scheduler's statements across tenants share (PostgreSQL): how many tenants one takes, and their schemas.

`store_claim_reads`, `store_claim_across` and `store_record_across` each write one statement
for many tenants, a part per tenant naming its schema: `schema_for` of a validated slug,
quoted by the dialect (values are always parameters). A statement takes at most
`TENANTS_PER_STATEMENT` tenants, which bounds its text and its plan.

Their row values go as arrays, one parameter a column, each given as the text of a
PostgreSQL array (`array_literal`) that the statement casts (`%(x)s::int[]`): psycopg
dumps a list element by element in Python, which was a sixth of a worker's CPU in a
burst (2.9 ms for the 225 arrays of one record statement over 15 tenants, 1.0 ms this
way; PostgreSQL reads the same text either way).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import datetime
from typing import Any, TypeVar

from almanac.db import schema_for

T = TypeVar("T")

TENANTS_PER_STATEMENT = 64  # a pass takes at most 16 rows a tenant, so it rarely spans more


def chunks(parts: Sequence[T]) -> Iterator[Sequence[T]]:
    """`parts` (one per tenant) in statements' worth, in order."""
    for start in range(0, len(parts), TENANTS_PER_STATEMENT):
        yield parts[start:start + TENANTS_PER_STATEMENT]


def schema_quoter(conn: Any) -> Callable[[str], str]:
    """A tenant slug -> its schema's name as SQL, quoted by `conn`'s dialect."""
    quote = conn.dialect.identifier_preparer.quote_schema
    return lambda slug: quote(schema_for(slug))


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
    return "{" + ",".join(["NULL" if v is None else element(v) for v in values]) + "}"
