"""SQLite: tables rebuilt as AUTOINCREMENT, so that an id once given is never given again.

A table keyed by `INTEGER PRIMARY KEY` gives a new row `max(id) + 1`: the id of the newest row, once
deleted, comes back (a new schedule took a deleted one's runs and audit entries). With AUTOINCREMENT,
SQLite keeps each table's highest id in `sqlite_sequence` and never goes below it. The keyword
cannot be added by ALTER TABLE, so each table is rebuilt as SQLite's own recipe says: a copy made
from the table's stored CREATE TABLE text with its key column declared `PRIMARY KEY AUTOINCREMENT`
(what SQLAlchemy writes for `sqlite_autoincrement`), the rows and their ids copied, the old table
dropped, the copy renamed, the indexes made again from their stored text. Working from the stored
text keeps every column, constraint and partial index exactly as it was, in the same order: alembic's
batch mode, which rebuilds from reflection, wrote the constraints in a different order at each run,
so two tenants' files would differ. The copy's rows carry their ids, which sets the table's `sqlite_sequence` to the
highest existing id; an id deleted before this migration, above that, is not known and may come back
once. Models say the same (`db.IDS_NEVER_REUSED`).

Dropping a table that other tables refer to would delete their rows (ON DELETE CASCADE) if foreign
keys were enforced: `almanac.tenants.migrations` runs the migrations with them off, and this refuses
to run otherwise; it checks the references are whole again before it ends.
"""

from __future__ import annotations

import re
from typing import Any

from alembic import op

_KEY = re.compile(r",\s*(?:CONSTRAINT \w+ )?PRIMARY KEY \((\w+)\)")  # named, or unnamed in older tables


def make_autoincrement(tables: tuple[str, ...], schema: str | None) -> None:
    """Rebuild each of `tables` (in `schema`, a real schema name, or the default) as AUTOINCREMENT."""
    bind = op.get_bind()
    if bind.dialect.name != "sqlite":
        return  # PostgreSQL's sequences never go back
    if bind.exec_driver_sql("PRAGMA foreign_keys").scalar():
        raise RuntimeError("foreign keys must be off while SQLite tables are rebuilt (almanac.tenants.migrations)")
    prefix = f'"{schema}".' if schema else ""
    for table in tables:
        _rebuild(bind, prefix, table)
    broken = bind.exec_driver_sql(f"PRAGMA {prefix}foreign_key_check").all()
    if broken:
        raise RuntimeError(f"rows refer to rows that are not there after the rebuild: {broken[:5]}")


def _rebuild(bind: Any, prefix: str, table: str) -> None:
    master = f"{prefix}sqlite_master"
    sql = bind.exec_driver_sql(f"SELECT sql FROM {master} WHERE type = 'table' AND name = ?", (table,)).scalar_one()
    if "AUTOINCREMENT" in sql.upper():
        return
    indexes = bind.exec_driver_sql(f"SELECT sql FROM {master} WHERE type = 'index' AND tbl_name = ? "
                                   "AND sql IS NOT NULL ORDER BY name", (table,)).scalars().all()
    copy = f"_autoincrement_{table}"
    bind.exec_driver_sql(_autoincrement_sql(sql, f'{prefix}"{copy}"'))
    bind.exec_driver_sql(f'INSERT INTO {prefix}"{copy}" SELECT * FROM {prefix}"{table}"')
    bind.exec_driver_sql(f'DROP TABLE {prefix}"{table}"')
    bind.exec_driver_sql(f'ALTER TABLE {prefix}"{copy}" RENAME TO "{table}"')
    for index in indexes:
        bind.exec_driver_sql(re.sub(r"^(CREATE (?:UNIQUE )?INDEX )", lambda m: m.group(1) + prefix, index))


def _autoincrement_sql(sql: str, name: str) -> str:
    """`sql`, a CREATE TABLE with a table constraint `PRIMARY KEY (col)` on an INTEGER column, as a
    CREATE TABLE `name` whose `col` is `INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT`."""
    key = _KEY.search(sql)
    if key is None:
        raise RuntimeError(f"no single-column primary key constraint in {sql!r}")
    sql = sql[:key.start()] + sql[key.end():]
    sql, found = re.subn(rf'(\n\s*"?{key.group(1)}"? INTEGER NOT NULL),', r"\1 PRIMARY KEY AUTOINCREMENT,", sql, count=1)
    if found != 1:
        raise RuntimeError(f"the key column {key.group(1)} is not an INTEGER NOT NULL column of {sql!r}")
    return re.sub(r"^CREATE TABLE\s+\S+", lambda _: f"CREATE TABLE {name}", sql, count=1)
