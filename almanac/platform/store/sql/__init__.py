"""The SQL PostgreSQL keeps for the scheduler: its PL/pgSQL functions and triggers, one `.sql` file each.

    shared/         functions of the shared schema (`{shared}` in the text): the due index's two
                    triggers and its bulk move, the delivery signals' trigger
    tenant/         functions of every tenant's schema (`{tenant}`): the claim pass's reads and writes,
                    the record of plain finished runs, the renewal of leases, the pending-jobs count and
                    its lock; and
                    `triggers.sql`, the tenant tables' triggers
    statements/     hot statements the Python sends as they are (`statement(name)`): the claim pass's pick
    functions.py    each function the Python calls, declared once (its arguments and returned columns),
                    and the calls made from that declaration, with named arguments

A file here is the current state. Migrations never read it: each installs a frozen copy kept
with it (`almanac/migrations/sql/<revision>/`), and a test holds every file here equal to the
copy of the newest migration that installs it. So changing a function is a new file under a new
versioned name (`..._v3`) and a migration that installs it; the old version stays installed for
the workers of the previous release (docs/decisions/0230-sql-in-sql-files.md).

Writes made both here and by SQLAlchemy Core (the per-tenant path, SQLite's and the savepoint
fallback's) are held equal by tests that run both forms on the same input on PostgreSQL and
compare the rows, the due index's included:

    almanac_claim_writes_v2   test_claim_across_writes.py::test_the_one_statement_writes_what_the_tenant_by_tenant_claim_writes
    almanac_record_plain_v2   test_record_across.py::test_the_one_statement_writes_what_the_per_tenant_records_write
    almanac_renew_leases_v1   test_renew_across.py::test_the_one_statement_writes_what_the_per_tenant_renewal_writes
    almanac_due_index_moved_v2 / the due-index triggers
                              test_due_index_by_statement.py (the index mirrors the occurrences either way)
"""

from __future__ import annotations

from pathlib import Path

FOLDER = Path(__file__).parent


INSTALLED = ("shared", "tenant")  # the folders whose files migrations install (frozen copies)


def current(tree: str, name: str) -> str:
    """The current text of `tree/name.sql` (`tree`: "shared" or "tenant")."""
    return (FOLDER / tree / f"{name}.sql").read_text()


def statement(name: str) -> str:
    """`statements/name.sql` without its comment lines (a `:word` in a comment would read as a parameter)."""
    lines = (FOLDER / "statements" / f"{name}.sql").read_text().splitlines()
    return "\n".join(line for line in lines if not line.lstrip().startswith("--")) + "\n"
