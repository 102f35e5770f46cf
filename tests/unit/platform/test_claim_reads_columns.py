"""The typed rows of the claim's reads across tenants name the columns the per-tenant reads select, in order.

`store_claim_reads` builds its SQL from the selects of `store_claim_batch` and unpacks each row
into a NamedTuple by position: a column added to a select but not to its row (or the other way
round) would shift every field after it.
"""

from __future__ import annotations

import importlib
import re

from almanac.platform import store_claim_batch as batch
from almanac.platform import store_claim_reads as reads

T0022 = importlib.import_module("almanac.migrations.tenant.versions.t0022_claim_reads_function")


def test_each_row_type_names_its_select_s_columns_in_order() -> None:
    pairs = [(reads.DueRow, batch.DUE_COLUMNS), (reads.ScheduleRow, batch.SCHEDULES.selected_columns),
             (reads.JobRow, batch.JOBS.selected_columns), (reads.ScriptRow, batch.SCRIPTS.selected_columns)]
    for row_type, columns in pairs:
        assert row_type._fields == tuple(column.name for column in columns), row_type.__name__


def test_the_running_attempts_read_is_what_its_loop_unpacks() -> None:
    assert [c.name for c in batch.RUNNING_OF.selected_columns] == ["id", "schedule_id", "lease_until"]


def test_the_reads_function_returns_each_row_type_s_fields_where_the_reads_unpack_them() -> None:
    """`almanac_claim_reads` (t0022) returns the rows by position: `_take` slices them by the row types' sizes."""
    returned = re.findall(r"(\w+) [a-z]+,?", T0022.RETURNS.split("(", 1)[1])
    expected = (["kind"] + [f"o_{f}" for f in reads.DueRow._fields] + ["o_priority", "o_due_at"]
                + [f"s_{f}" for f in reads.ScheduleRow._fields] + [f"j_{f}" for f in reads.JobRow._fields]
                + [f"c_{f}" for f in reads.ScriptRow._fields] + ["d_runs", "d_ms"])
    assert returned == expected
    assert reads._AT_DAY == len(expected) - 3  # the day's two columns last, `kind` not counted
