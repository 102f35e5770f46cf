"""A job that ran is not run again for the same `run_at` (SPEC section 8), however long ago it ran:
pruning history (SPEC section 9) keeps what that promise needs."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from almanac import retention
from tests.integration.platform.test_job_keys import _script
from tests.integration.platform.conftest import on_both_paths

world_path = on_both_paths  # through the claim and record production runs on each backend


def _calls(client: Any, key: str, body: dict[str, Any]) -> list[Any]:
    """Cancel the job, then PUT it again with the same time, singly and in a batch: what each answers."""
    cancelled = client.delete(f"/api/v1/jobs/{key}").json()["state"]
    put = client.put(f"/api/v1/jobs/{key}", json=body)
    batch = client.post("/api/v1/jobs/batch", json={"jobs": [{"key": key, **body}]}).json()["items"][0]
    again = client.post("/api/v1/jobs/batch", json={"jobs": [{"key": key, **body}]}).json()["items"][0]
    return [cancelled, put.status_code, put.json()["state"], put.json()["next_run_at"], batch["state"],
            again["outcome"], again["state"]]


def test_a_job_that_ran_is_not_run_again_after_its_history_is_pruned(api: Any, services: Any) -> None:
    client = api("editor")
    sid = _script(services, client.tenant)
    run_at = services.clock.now() + timedelta(minutes=1)
    body = {"script_id": sid, "run_at": run_at.isoformat()}
    for key in ("before", "after"):
        assert client.put(f"/api/v1/jobs/{key}", json=body).status_code == 201
    services.clock.advance(minutes=2)
    assert {claim.job_key for claim in services.scheduler.tick(client.tenant)} == {"before", "after"}
    assert client.get("/api/v1/jobs/after").json()["state"] == "done"

    answers_before_pruning = _calls(client, "before", body)
    assert answers_before_pruning == ["cancelled", 200, "done", None, "done", "unchanged", "done"]

    services.clock.advance(days=40)
    report = retention.prune(services.db, [client.tenant], 30, services.clock.now())[client.tenant]
    assert report.runs == 2 and client.get("/api/v1/runs?job_key=after").json()["items"] == []
    assert _calls(client, "after", body) == answers_before_pruning
    assert _calls(client, "before", body) == answers_before_pruning
    assert services.scheduler.tick(client.tenant) == []
    # A new time is a new run, as before.
    moved = client.put("/api/v1/jobs/after", json={**body, "run_at": (run_at + timedelta(days=50)).isoformat()})
    assert moved.json()["state"] == "pending"
