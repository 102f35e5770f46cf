"""Names the PostgreSQL-only steps of migrations need (triggers and functions between schemas).

Quoted for SQL, read from the running migration: the shared schema is the connection's
`current_schema()` (the functions run with the caller's search_path, which on a tenant's
connection need not find it), the tenant's schema is the one alembic's env was given.
"""

from __future__ import annotations

from pathlib import Path

import sqlalchemy as sa
from alembic import context, op


def shared_schema() -> str:
    """The shared schema's name, quoted."""
    bind = op.get_bind()
    return bind.dialect.identifier_preparer.quote(bind.execute(sa.text("SELECT current_schema()")).scalar_one())


def tenant_names() -> tuple[str, str, str]:
    """(the tenant's schema quoted, the shared schema quoted, the tenant's slug)."""
    schema = context.config.attributes["schema"]
    return op.get_bind().dialect.identifier_preparer.quote(schema), shared_schema(), schema[2:].replace("_", "-")


def create_planned_once(schema: str, name: str, arguments: str, returns: str, body: str) -> None:
    """Create (or replace) a PL/pgSQL function of a tenant's schema that a backend plans once per tenant.

    For the scheduler's hot writes (t0020, t0021): `plan_cache_mode = force_generic_plan` keeps the
    first plan of each statement instead of planning five custom ones first, and `random_page_cost`
    is `tenant_parts.plan_for_key_lookups`'s value, so that the kept plan looks rows up by key.
    """
    op.execute(f"CREATE OR REPLACE FUNCTION {schema}.{name}({arguments})\nRETURNS {returns}\n"
               "LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET random_page_cost = 1.1\n"
               f"AS $body${body}$body$")


# Frozen copies of `almanac/platform/store/sql/`, one folder per revision that installs them: a migration
# must install the text it was written with, whatever the current files say later.
FROZEN = Path(__file__).parent / "sql"


def install_frozen(revision: str, name: str, *, tenant: str = "", shared: str = "") -> None:
    """Run `sql/<revision>/<name>.sql` with `{tenant}` / `{shared}` replaced by these quoted schemas.

    A file of several statements ends each with a line holding only ";" (a function's body has `;`
    inside its lines, never alone on one).
    """
    text = (FROZEN / revision / f"{name}.sql").read_text().replace("{tenant}", tenant).replace("{shared}", shared)
    for statement in text.split("\n;\n"):
        if any(line.strip() and not line.lstrip().startswith("--") for line in statement.splitlines()):
            op.execute(statement)
