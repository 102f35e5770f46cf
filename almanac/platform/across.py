"""What the scheduler's statements across tenants share (PostgreSQL): how many tenants one takes, and their schemas.

`store_claim_reads`, `store_claim_across` and `store_record_across` each write one statement
for many tenants, a part per tenant naming its schema: `schema_for` of a validated slug,
quoted by the dialect (values are always parameters). A statement takes at most
`TENANTS_PER_STATEMENT` tenants, which bounds its text and its plan.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
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
