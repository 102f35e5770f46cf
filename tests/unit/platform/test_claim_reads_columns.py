"""The typed rows of the claim's reads across tenants name the columns the per-tenant reads select, in order.

The per-tenant path reads by the selects of `store.claim_rows`, the path across tenants by the
columns of `almanac_claim_reads_v2` by name: both give the same row types.
"""

from __future__ import annotations

from almanac.platform.store import claim_rows as batch
from almanac.platform.store.due_index import reads
from almanac.platform.store.sql.functions import CLAIM_READS


def test_each_row_type_names_its_select_s_columns_in_order() -> None:
    pairs = [(reads.DueRow, batch.DUE_COLUMNS), (reads.ScheduleRow, batch.SCHEDULES.selected_columns),
             (reads.JobRow, batch.JOBS.selected_columns), (reads.ScriptRow, batch.SCRIPTS.selected_columns)]
    for row_type, columns in pairs:
        assert row_type._fields == tuple(column.name for column in columns), row_type.__name__


def test_the_running_attempts_read_is_what_its_loop_unpacks() -> None:
    assert [c.name for c in batch.RUNNING_OF.selected_columns] == ["id", "schedule_id", "lease_until"]


def test_each_row_type_s_fields_are_columns_the_reads_function_declares() -> None:
    """`due_index.reads` reads a row type's field `f` from the column `<prefix>_f` of `almanac_claim_reads_v2`,
    found by name in its declaration (`sql.functions.CLAIM_READS`)."""
    declared = set(CLAIM_READS.column_names)
    for prefix, row_type in (("o", reads.DueRow), ("s", reads.ScheduleRow), ("j", reads.JobRow),
                             ("c", reads.ScriptRow)):
        missing = [f for f in row_type._fields if f"{prefix}_{f}" not in declared]
        assert missing == [], row_type.__name__
