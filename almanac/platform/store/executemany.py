"""The hot path's executemany statements, without SQLAlchemy's per-row parameter machinery.

`conn.execute(stmt, rows)` builds every row's parameters generically (a dict of
every bind, each value through its type's processor): about 10-15 µs a row on
this box, several times what SQLite itself takes. The scheduler runs a few such
rows per run (claim, release, finish), so that was a large share of its CPU.

`Bulk` compiles a Core statement once per dialect (the connection's
`schema_translate_map` rendered into the SQL text per tenant) and hands the rows
straight to the driver's executemany: the values of each row in the order the
SQL wants them, the statement's own constants filled in, and only the binds
whose type has a processor (UTCDateTime's, on SQLite) converted. The SQL is
SQLAlchemy's own compilation of the same statement, so both backends keep their
dialect's text; only the per-row work changes.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from itertools import chain
from typing import Any

_NO_VALUE = object()


class _Compiled:
    """A statement compiled for one dialect, with its tenant schemas rendered as placeholders."""

    __slots__ = ("sql", "names", "defaults", "processors", "positional", "placeholders", "quote", "_by_schemas")

    def __init__(self, stmt: Any, dialect: Any, schemas: tuple[str, ...]) -> None:
        # Compiled once per dialect, not per tenant: each translated schema is a placeholder in
        # the text, replaced by the tenant's own (quoted) schema name when first used.
        self.placeholders = {schema: f"almanac_bulk_schema_{i}" for i, schema in enumerate(schemas)}
        compiled = stmt.compile(dialect=dialect, schema_translate_map=self.placeholders or None,
                                render_schema_translate=bool(self.placeholders),
                                for_executemany=True)  # no implicit RETURNING of an INSERT's key
        self.sql: str = compiled.string
        self.quote = dialect.identifier_preparer.quote_schema
        self._by_schemas: dict[tuple[tuple[str, str], ...], str] = {}
        self.positional: bool = compiled.positional
        binds = {name: bind for bind, name in compiled.bind_names.items()}  # by the name the SQL uses
        self.names: tuple[str, ...] = tuple(compiled.positiontup if compiled.positional else binds)
        params = compiled.params
        # A bind without a value (bindparam("b_id")) must come from each row; the others are constants.
        self.defaults = [_NO_VALUE if binds[name].required else params[name] for name in self.names]
        self.processors: list[tuple[int, Any]] = []
        for i, name in enumerate(self.names):
            processor = binds[name].type.dialect_impl(dialect).bind_processor(dialect)
            if processor is not None:
                self.processors.append((i, processor))
                if self.defaults[i] is not _NO_VALUE and self.defaults[i] is not None:
                    self.defaults[i] = processor(self.defaults[i])  # a constant: converted once

    def sql_for(self, translate: tuple[tuple[str, str], ...]) -> str:
        found = self._by_schemas.get(translate)
        if found is None:
            found = self.sql
            for schema, real in translate:
                found = found.replace(self.placeholders[schema] + ".", self.quote(real) + ".")
            if len(self._by_schemas) > 100_000:  # a string per tenant schema: bounded all the same
                self._by_schemas.clear()
            self._by_schemas[translate] = found
        return found


class Bulk:
    """One Core statement (an UPDATE or INSERT without RETURNING) run as a DBAPI executemany."""

    def __init__(self, stmt: Any) -> None:
        self.stmt = stmt
        self._compiled: dict[tuple[Any, ...], _Compiled] = {}
        self._lock = threading.Lock()

    def __str__(self) -> str:
        return str(self.stmt)

    def _for(self, conn: Any) -> tuple[_Compiled, str]:
        translate = tuple(sorted((conn.get_execution_options().get("schema_translate_map") or {}).items()))
        dialect = conn.dialect
        key = (type(dialect), dialect.paramstyle, tuple(schema for schema, _ in translate))
        found = self._compiled.get(key)
        if found is None:
            with self._lock:
                found = self._compiled.setdefault(key, _Compiled(self.stmt, dialect, key[2]))
        return found, found.sql_for(translate)

    def executemany(self, conn: Any, rows: Sequence[dict[str, Any]]) -> int:
        """Run the statement once per row (each a dict of bind name -> value); the total rowcount."""
        if not rows:
            return 0
        c, sql = self._for(conn)
        names, defaults, processors = c.names, c.defaults, c.processors
        # Rows of a batch often repeat a value (the claim time, a lease end): convert it once.
        memo: list[tuple[Any, Any]] = [(_NO_VALUE, None)] * len(processors)
        params: list[Any] = []
        for row in rows:
            values = [row.get(name, default) for name, default in zip(names, defaults)]
            for k, (i, processor) in enumerate(processors):
                if names[i] in row:
                    value = values[i]
                    seen, converted = memo[k]
                    if value is not seen and (value is None or value != seen):
                        converted = processor(value)
                        memo[k] = (value, converted)
                    values[i] = converted
            if _NO_VALUE in values:
                missing = [n for n, v in zip(names, values) if v is _NO_VALUE]
                raise KeyError(f"no value for bind parameter(s) {missing} of {self.stmt}")
            params.append(tuple(values) if c.positional else dict(zip(names, values)))
        return conn.exec_driver_sql(sql, params).rowcount


class CopyRows:
    """New rows of one table written by one binary `COPY ... FROM STDIN` (PostgreSQL only).

    For rows that nothing can clash with (new ids from the table's sequence, occurrences of
    schedules created in the same transaction): COPY has no ON CONFLICT, and a clash would fail the
    transaction. Per row it is a C routine of psycopg's; an executemany of 1,000 rows, even pipelined,
    cost ~15 µs a row in Python and twice PostgreSQL's time (one INSERT executed per row). Row
    triggers fire as for INSERT. Each row is a tuple in `columns`' order; the columns' bind
    processors (UTCDateTime's check that a time is aware) run as for an INSERT.
    """

    def __init__(self, table: Any, columns: Sequence[str]) -> None:
        self.table, self.columns = table, tuple(columns)
        self._prepared: tuple[str, list[str], list[tuple[int, Any]]] | None = None

    def _prepare(self, dialect: Any) -> tuple[str, list[str], list[tuple[int, Any]]]:
        if self._prepared is None:
            cols = [self.table.c[name] for name in self.columns]
            # The server's own type names (VARCHAR(200) -> varchar): binary COPY sends each value in it.
            types = [col.type.compile(dialect=dialect).split("(")[0].lower() for col in cols]
            processors = [(i, p) for i, col in enumerate(cols)
                          if (p := col.type.dialect_impl(dialect).bind_processor(dialect)) is not None]
            names = ", ".join(dialect.identifier_preparer.quote(name) for name in self.columns)
            self._prepared = (f"({names}) FROM STDIN (FORMAT BINARY)", types, processors)
        return self._prepared

    def write(self, conn: Any, rows: Iterable[Sequence[Any]]) -> None:
        """COPY `rows` into the table in the connection's tenant schema (its `schema_translate_map`).

        Each row is formatted and sent as it comes (a generator's rows are never all held at once:
        fewer live objects, fewer of the garbage collector's passes); nothing is sent for no rows."""
        rows = iter(rows)
        first = next(rows, None)
        if first is None:
            return
        dialect = conn.dialect
        tail, types, processors = self._prepare(dialect)
        translate = conn.get_execution_options().get("schema_translate_map") or {}
        schema = translate.get(self.table.schema, self.table.schema)
        quote = dialect.identifier_preparer
        target = (quote.quote_schema(schema) + "." if schema else "") + quote.quote(self.table.name)
        with conn.connection.cursor() as cursor, cursor.copy(f"COPY {target} {tail}") as copy:
            copy.set_types(types)
            write = copy.write_row
            if not processors:
                write(first)
                for row in rows:
                    write(row)
                return
            # Rows of a batch repeat a value (its one `now`): each processor converts it once.
            last: list[tuple[Any, Any]] = [(_NO_VALUE, None)] * len(processors)
            for row in chain((first,), rows):
                values = list(row)
                for k, (i, processor) in enumerate(processors):
                    value = values[i]
                    seen, converted = last[k]
                    if value is not seen:
                        converted = processor(value)
                        last[k] = (value, converted)
                    values[i] = converted
                write(values)
