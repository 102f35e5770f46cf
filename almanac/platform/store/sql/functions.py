"""The PL/pgSQL functions the Python calls, each declared once: its versioned name, arguments and columns.

A call is made from the declaration (`Function.call`), with named arguments (`a => %(key)s`), so
an argument's place in the list never matters; a returned row is read by column name
(`Function.position`), never by an offset counted by hand. The declarations are held to the
functions PostgreSQL has installed (names, types and order) by
`tests/integration/platform_pg/test_sql_signatures.py`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class Function:
    """A function of the shared schema or of a tenant's, as its `.sql` file creates it."""

    name: str  # versioned: a changed function is a new name, the old one kept for older workers
    tree: str  # "shared" or "tenant"
    arguments: tuple[tuple[str, str], ...]  # (name, SQL type) in the function's order
    columns: tuple[tuple[str, str], ...] = ()  # a set-returning function's columns; () for a scalar

    def call(self, qualifier: str, values: Mapping[str, str]) -> str:
        """`qualifier.name(argument => value, ...)`; `values` gives each argument's SQL (a placeholder)."""
        missing = [name for name, _ in self.arguments if name not in values]
        if missing or len(values) != len(self.arguments):
            raise ValueError(f"{self.name}: arguments {missing or sorted(set(values) - set(self.argument_names))}")
        given = ", ".join(f"{name} => {values[name]}" for name, _ in self.arguments)
        return f"{qualifier}.{self.name}({given})" if qualifier else f"{self.name}({given})"

    @property
    def argument_names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.arguments)

    @property
    def column_names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.columns)

    def position(self, column: str, offset: int = 0) -> int:
        """Where `column` is in a row that selects the columns in order after `offset` others."""
        return offset + self.column_names.index(column)


def _arrays(prefix: str, columns: str) -> tuple[tuple[str, str], ...]:
    """Arguments `prefix_<name>` of array type from "name type, name type, ..."."""
    return tuple((name, f"{kind}[]") for name, kind in _prefixed(prefix, columns))


def _typed(columns: str) -> tuple[tuple[str, str], ...]:
    return tuple((name, kind) for name, kind in (item.split() for item in columns.split(",")))


def _prefixed(prefix: str, columns: str) -> tuple[tuple[str, str], ...]:
    return tuple((f"{prefix}_{name}", kind) for name, kind in _typed(columns))


# The values of a new occurrence and of a new run, by the column each one writes.
OCCURRENCE_VALUES = ("scheduled_for timestamptz, due_at timestamptz, priority int, trigger varchar, status varchar,"
                     " attempt int, created_at timestamptz, schedule_id int, schedule_version int")
RUN_VALUES = ("occurrence_id int, schedule_id int, job_key varchar, script_id int, script_version int,"
              " trigger varchar, scheduled_for timestamptz, created_at timestamptz, started_at timestamptz,"
              " status varchar, attempt int, lease_token varchar")
CAS_VALUES = "id int, status varchar, attempt int, token varchar, lease timestamptz"

CLAIM_WRITES = Function(
    "almanac_claim_writes_v2", "tenant",
    _arrays("pl", OCCURRENCE_VALUES) + _arrays("nx", "id int, next timestamptz") + _arrays("ru", RUN_VALUES)
    + _arrays("cas", CAS_VALUES) + (("running", "varchar"),),
    _typed("kind int, id int, run_id int, due_at timestamptz, priority int"),
)

# The runs' columns a record writes, in the order of `store.record._FINISH_RUN`'s values.
RECORDED_RUN = ("status varchar, reason varchar, started_at timestamptz, finished_at timestamptz, output text,"
                " error text, error_line int, logs text, duration_ms int, event text, cpu_ms int, http text")

RECORD_PLAIN = Function(
    "almanac_record_plain_v2", "tenant",
    _typed("a_occurrence_ids int[], a_tokens varchar[], a_run_ids int[]") + _arrays("a", RECORDED_RUN)
    + _typed("a_job_ids int[], a_job_run_at timestamptz[], a_job_at timestamptz[], a_schedule_ids int[],"
             " a_queued_due timestamptz, a_done varchar, a_running varchar, a_queued varchar, a_job_done varchar,"
             " a_job_pending varchar"),
    _typed("w_kind int, w_id int, w_due_at timestamptz, w_priority int"),
)

# What a claim pass reads of a due occurrence, its schedule, its job and their script, by column.
DUE_READ = ("id int, schedule_id int, job_id int, schedule_version int, scheduled_for timestamptz, trigger varchar,"
            " status varchar, attempt int, lease_token varchar, priority int, due_at timestamptz")
SCHEDULE_READ = ("id int, script_id int, input_kind varchar, rrule text, payload text, enabled boolean,"
                 " misfire varchar, catchup_window_s int, overlap varchar, expire_after_s int, max_attempts int,"
                 " retry_backoff_s int, priority int, version int")
JOB_READ = ("id int, key varchar, script_id int, run_at timestamptz, payload text, expire_after_s int,"
            " max_attempts int, state varchar, root_key varchar, depth int")
SCRIPT_READ = "id int, timeout_ms int, memory_mb int, current_version int"

CLAIM_READS = Function(
    "almanac_claim_reads_v2", "tenant",
    _typed("a_ids int[], a_now timestamptz, a_day timestamptz, a_running varchar"),
    _typed("kind int") + _prefixed("o", DUE_READ) + _prefixed("s", SCHEDULE_READ) + _prefixed("j", JOB_READ)
    + _prefixed("c", SCRIPT_READ)
    + _typed("d_runs bigint, d_ms bigint"),
)

DUE_INDEX_MOVED = Function(
    "almanac_due_index_moved_v2", "shared",
    _typed("p_slugs varchar[], p_ids int[], p_dues timestamptz[], p_priorities int[]"),
)

PENDING_JOBS_HELD = Function(
    "almanac_pending_jobs_held_v1", "tenant", _typed("a_tenant_key int, a_quota_key int"))

RENEW_LEASES = Function(
    "almanac_renew_leases_v1", "tenant",
    _typed("a_ids int[], a_tokens varchar[], a_leases timestamptz[], a_running varchar"),
    _typed("w_id int, w_due_at timestamptz, w_priority int"),
)

CALLED = (CLAIM_WRITES, RECORD_PLAIN, CLAIM_READS, DUE_INDEX_MOVED, PENDING_JOBS_HELD, RENEW_LEASES)
