"""The migrated schema as committed text: `pg_dump --schema-only` normalised (PostgreSQL), `sqlite_master` (SQLite).

The snapshot files (`almanac/migrations/schema/`) are written by `make schema-snapshot` and read by
`tests/integration/test_schema_snapshot.py`. A tenant's schema name is replaced by `{tenant}`, so
any tenant's dump is the same text; what changes between two dumps of the same schema (pg_dump's
comments and session settings) is left out.
"""

from __future__ import annotations

import re
import sqlite3
import subprocess
from pathlib import Path

from sqlalchemy import text

from almanac.db import Database, schema_for
from tests.support.pg import find_bin

SNAPSHOTS = Path(__file__).resolve().parents[2] / "almanac" / "migrations" / "schema"


def snapshot_path(backend: str, tree: str) -> Path:
    return SNAPSHOTS / f"{backend}-{tree}.sql"


def _normalised(dump: str, schema: str | None) -> str:
    kept = []
    for line in dump.splitlines():
        if line.startswith(("--", "SET ", "SELECT pg_catalog.set_config", "\\")):
            continue
        kept.append(line.rstrip())
    out = re.sub(r"\n{3,}", "\n\n", "\n".join(kept)).strip() + "\n"
    # Each tenant's tables get their own analyze threshold (t0018 spreads them): not the schema's shape.
    out = re.sub(r"autovacuum_analyze_threshold='\d+'", "autovacuum_analyze_threshold='{spread}'", out)
    return out.replace(f"{schema}.", "{tenant}.").replace(f"SCHEMA {schema}", "SCHEMA {tenant}") if schema else out


def pg_dump(db: Database, schema: str) -> str:
    """`pg_dump --schema-only` of one schema of `db`, without owners, privileges or comments."""
    url = db.settings.database_url.replace("postgresql+psycopg", "postgresql")
    binary = find_bin("pg_dump")
    assert binary, "pg_dump not installed"
    done = subprocess.run([binary, "--schema-only", "--no-owner", "--no-privileges", "--no-comments",
                           "--schema", schema, "--dbname", url], check=True, capture_output=True, text=True,
                          timeout=120)
    return done.stdout


def sqlite_master(path: Path) -> str:
    """The file's `sqlite_master` (tables, indexes, triggers, views), one statement a line, by type and name."""
    with sqlite3.connect(path) as conn:
        rows = conn.execute("SELECT type, name, sql FROM sqlite_master WHERE sql IS NOT NULL "
                            "AND name NOT LIKE 'sqlite_%' ORDER BY type, name").fetchall()
    return "".join(f"{sql};\n" for _, _, sql in rows)


def dump(db: Database, tree: str, slug: str | None = None) -> str:
    """The normalised dump of the shared schema (`tree` "shared") or of tenant `slug`'s ("tenant")."""
    if db.is_sqlite:
        path = db.tenant_file(slug) if tree == "tenant" else Path(db.settings.database_url.split("///", 1)[1])
        return sqlite_master(path)
    if tree == "tenant":
        assert slug is not None
        return _normalised(pg_dump(db, schema_for(slug)), schema_for(slug))
    with db.engine.connect() as conn:
        shared = conn.execute(text("SELECT current_schema()")).scalar_one()
    return _normalised(pg_dump(db, shared), None)


def sections(snapshot: str) -> list[str]:
    """The snapshot's statements (blocks between blank lines), for a readable difference."""
    return [block for block in snapshot.split("\n\n") if block.strip()]
