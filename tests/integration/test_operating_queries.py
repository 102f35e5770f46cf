"""The operating pages' read-only queries on both databases: folded occurrences, search, chains, a run's story."""

from __future__ import annotations

from almanac.web.views import history, run_detail
from tests.support.operating import add_script, seed


def test_history_and_run_context_on_each_backend(database, make_tenant, now):
    tenant = make_tenant()
    seeded = seed(database, tenant, add_script(database, tenant, now), now)
    with database.tenant_session(tenant) as s:
        rows, more = history.list_occurrences(s, history.RunFilter(), limit=3)
        assert [r.run.id for r in rows] == sorted((r.run.id for r in rows), reverse=True) and more == rows[-1].run.id
        rest, none = history.list_occurrences(s, history.RunFilter(), limit=3, before_id=more)
        assert none is None and len(rows) + len(rest) == 4
        folded = next(r for r in rows + rest if r.run.id == seeded.retry)
        assert [a.attempt for a in folded.attempts] == [1, 2]
        found, _ = history.list_occurrences(s, history.RunFilter(text="DB IS"), limit=10)
        assert found == []  # the error belongs to an attempt that was retried: its occurrence succeeded
        found, _ = history.list_occurrences(s, history.RunFilter(text="shipped", root_key="check-7"), limit=10)
        assert [r.run.job_key for r in found] == ["check-7"]
        found, _ = history.list_occurrences(s, history.RunFilter(text="50%_x"), limit=10)
        assert found == []
        ctx = run_detail.run_context(s, s.get(history.Run, seeded.retry))
        assert ctx.event["payload"] == {"report": "sales"} and ctx.event_rebuilt
        assert [(d.status, name) for d, name in ctx.emitted[0]["deliveries"]] == [("succeeded", "Reports hook"),
                                                                                   ("dead", "Broken hook")]
        assert [j.key for j in ctx.follow_ups] == ["check-7"] and len(ctx.attempts) == 2
        steps = run_detail.chain(s, "check-7")
        assert [(j.key, r.status if r else None) for j, r in steps] == [
            ("check-7", "failed"), ("check-7-b", "succeeded"), ("check-7-c", None)]
