"""The declared signatures of the PL/pgSQL functions the Python calls are the functions PostgreSQL has.

`sql.functions` declares each function once (versioned name, arguments, returned columns) and the
calls and row readers are made from it; here each declaration is held to `pg_proc` of a migrated
tenant schema or of the shared schema: names, types and order of every argument and column.
"""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy import text

from almanac.db import Database, schema_for
from almanac.platform.store.sql.functions import CALLED, Function

# PostgreSQL's names of the short type names the declarations use.
_CANONICAL = {"int": "integer", "varchar": "character varying", "timestamptz": "timestamp with time zone",
              "bigint": "bigint", "text": "text", "boolean": "boolean"}

_INSTALLED = text("""
    SELECT a.name, format_type(a.type, NULL), coalesce(a.mode, 'i')
    FROM pg_proc AS p JOIN pg_namespace AS n ON n.oid = p.pronamespace,
         unnest(p.proargnames, coalesce(p.proallargtypes, p.proargtypes::oid[]), p.proargmodes::text[])
             WITH ORDINALITY AS a(name, type, mode, k)
    WHERE n.nspname = :schema AND p.proname = :name
    ORDER BY a.k
""")


def _canonical(kind: str) -> str:
    base = kind.removesuffix("[]")
    return _CANONICAL[base] + ("[]" if kind.endswith("[]") else "")


def _declared(function: Function) -> list[tuple[str, str, str]]:
    mode = "t" if function.columns else "i"  # a RETURNS TABLE function's columns are its 't' arguments
    return ([(name, _canonical(kind), "i") for name, kind in function.arguments]
            + [(name, _canonical(kind), mode) for name, kind in function.columns])


def test_every_declared_function_is_installed_as_declared(pg: Database, make_tenant: Callable[..., str]) -> None:
    slug = make_tenant()
    with pg.engine.connect() as conn:
        shared = conn.execute(text("SELECT current_schema()")).scalar_one()
        for function in CALLED:
            schema = schema_for(slug) if function.tree == "tenant" else shared
            rows = conn.execute(_INSTALLED, {"schema": schema, "name": function.name}).all()
            assert [tuple(r) for r in rows] == _declared(function), function.name
