"""The claim and record statements across tenants find their rows by key, not by reading whole tables.

They look up a few rows of each tenant by id (`id = ANY(...)`, `schedule_id = ANY(...)`).
With PostgreSQL's default `random_page_cost` (4, for spinning disks) and a tenant of
1,000 schedules, the planner judged eight index lookups dearer than reading the 30 pages of
`schedules` and filtering all 1,000 rows, and chose the sequential scan in the schedules'
read, the claim's writes and the record: measured, a third of the executor's time in a burst
(docs/decisions/0019-plans-for-lookups-by-key.md). The tenant here has that size, with statistics as autovacuum leaves
them; every plan of a claim pass and of its record is captured by `auto_explain`, and none
may read these tables sequentially. It fails on the code before `tenant_parts.plan_for_key_lookups`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import event, text

from almanac.db import Database, schema_for
from almanac.platform.store.sql_store import SqlStore
from tests.integration.platform.scheduler_world import EveryRules
from tests.integration.platform_pg.test_record_across import DONE, T0, T1, _items

pytestmark = pytest.mark.postgres

SCHEDULES = 1_000
CLAIMED = 8  # a tenant's share of a burst of 8,000 over 1,000 tenants


def _populate(database: Database, slug: str) -> None:
    """A script and SCHEDULES schedules every minute, each with its occurrence planned at T1; never analyzed.

    As a new tenant's tables are for their first thousands of changes (migration t0018 holds
    autovacuum's ANALYZE back), and as the bench's template clones were in every sitting.
    """
    schema = schema_for(slug)
    with database.engine.begin() as conn:
        conn.execute(text(f"INSERT INTO {schema}.scripts (name, current_version, timeout_ms, memory_mb, created_at, "
                          "updated_at) VALUES ('s', 1, 1000, 32, :t0, :t0)"), {"t0": T0})
        conn.execute(text(f"INSERT INTO {schema}.script_versions (script_id, version, source, created_at) "
                          "VALUES (1, 1, 'export default () => 1', :t0)"), {"t0": T0})
        conn.execute(text(
            f"INSERT INTO {schema}.schedules (name, script_id, rule_text, input_kind, rrule, timezone, payload, "
            "enabled, misfire, catchup_window_s, overlap, expire_after_s, max_attempts, retry_backoff_s, priority, "
            "failures_in_row, version, next_run_at, created_at, updated_at) "
            "SELECT 'sch ' || n, 1, 'EVERY 60', 'test', 'EVERY 60', 'UTC', '{}', true, 'run_once', 86400, 'skip', "
            "NULL, 3, 10, 0, 0, 1, :t1, :t0, :t0 FROM generate_series(1, :n) AS n"), {"t0": T0, "t1": T1, "n": SCHEDULES})
        conn.execute(text(
            f"INSERT INTO {schema}.occurrences (schedule_id, schedule_version, scheduled_for, due_at, priority, "
            f"trigger, status, attempt, created_at) SELECT id, 1, :t1, :t1, 0, 'schedule', 'planned', 0, :t0 "
            f"FROM {schema}.schedules"), {"t0": T0, "t1": T1})


@pytest.fixture
def plans(database: Database) -> Iterator[list[dict[str, Any]]]:
    """The plans of every statement run on `database`'s connections from now on, as `auto_explain` gives them."""
    seen: list[dict[str, Any]] = []

    def explain_to_me(dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.add_notice_handler(lambda diag: seen.append(json.loads(diag.message_primary.split("\n", 1)[1])))
        with dbapi_conn.cursor() as cur:
            cur.execute("LOAD 'auto_explain'")
            cur.execute("SET auto_explain.log_min_duration = 0")
            cur.execute("SET auto_explain.log_level = notice")
            cur.execute("SET auto_explain.log_format = json")
            cur.execute("SET auto_explain.log_nested_statements = on")  # the claim's statements and the record are in functions
        dbapi_conn.commit()

    database.engine.dispose()  # connections opened from now on explain their statements
    event.listen(database.engine, "connect", explain_to_me)
    yield seen
    event.remove(database.engine, "connect", explain_to_me)
    database.engine.dispose()


def _scans(plan: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """(node type, relation) of every node that reads a relation, in a plan and its sub-plans."""
    if "Relation Name" in plan:
        yield plan["Node Type"], plan["Relation Name"]
    for child in plan.get("Plans", []):
        yield from _scans(child)


def _sequential(plans: list[dict[str, Any]], tables: tuple[str, ...]) -> list[tuple[str, str]]:
    """(table, the statement's first words) of each sequential scan of one of these tables."""
    return [(relation, re.sub(r"\s+", " ", p["Query Text"])[:60]) for p in plans for node, relation in _scans(p["Plan"])
            if node == "Seq Scan" and relation in tables]


def test_a_claim_and_its_record_look_rows_up_by_key(
        database: Database, make_tenant: Callable[..., str], plans: list[dict[str, Any]]) -> None:
    slug = make_tenant("kl")
    _populate(database, slug)
    plans.clear()  # the set-up's statements
    store = SqlStore(database, EveryRules(), lease_margin_s=600)
    claims = store.due_index.claim_across(T1, CLAIMED).claims
    assert len(claims) == CLAIMED
    assert store.due_index.finish_across(_items(claims, lambda c: DONE)) == [True] * CLAIMED
    touched = {relation for p in plans for _, relation in _scans(p["Plan"])}
    assert {"schedules", "occurrences"} <= touched  # the capture saw the tenant's statements
    for inside in ("WITH l AS (", "cas AS (", "rel AS ("):  # the claim's reads and writes and the record, in functions
        assert any(inside in p["Query Text"] for p in plans), inside
    assert _sequential(plans, ("schedules", "occurrences")) == [], [p["Query Text"][:50] for p in plans]


def test_the_setting_lasts_only_for_the_pass(database: Database, make_tenant: Callable[..., str]) -> None:
    """The server's own cost settings hold for every other statement on the same connections."""
    slug = make_tenant("kl2")
    _populate(database, slug)
    store = SqlStore(database, EveryRules(), lease_margin_s=600)
    with database.engine.connect() as conn:
        default = conn.execute(text("SHOW random_page_cost")).scalar_one()
    claims = store.due_index.claim_across(T1, CLAIMED).claims
    store.due_index.finish_across(_items(claims, lambda c: DONE))
    for _ in range(database.engine.pool.size() + 1):  # every pooled connection, and one more
        with database.engine.connect() as conn:
            assert conn.execute(text("SHOW random_page_cost")).scalar_one() == default
    assert store.due_index.claim_across(T1 + timedelta(seconds=60), CLAIMED).claims  # and the next pass still claims
