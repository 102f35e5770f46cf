"""The typed rows of the claim's reads across tenants name the columns the per-tenant reads select, in order.

`store_claim_reads` builds its SQL from the selects of `store_claim_batch` and unpacks each row
into a NamedTuple by position: a column added to a select but not to its row (or the other way
round) would shift every field after it.
"""

from __future__ import annotations

from almanac.platform import store_claim_batch as batch
from almanac.platform import store_claim_reads as reads


def test_each_row_type_names_its_select_s_columns_in_order() -> None:
    pairs = [(reads.DueRow, batch.DUE_COLUMNS), (reads.ScheduleRow, batch.SCHEDULES.selected_columns),
             (reads.JobRow, batch.JOBS.selected_columns), (reads.ScriptRow, batch.SCRIPTS.selected_columns)]
    for row_type, columns in pairs:
        assert row_type._fields == tuple(column.name for column in columns), row_type.__name__


def test_the_running_attempts_read_is_what_its_loop_unpacks() -> None:
    assert [c.name for c in batch.RUNNING_OF.selected_columns] == ["id", "schedule_id", "lease_until"]
