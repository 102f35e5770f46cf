"""Fair run slots: the pure decisions behind the timer's claim and start paths."""

from __future__ import annotations

import pytest

from almanac.platform.decisions import slots
from almanac.platform.decisions.slots import FairQueue


def _drain(queue: FairQueue[str], limit: int, steps: int) -> list[str]:
    started = []
    for _ in range(steps):
        picked = queue.pop(limit)
        if picked is None:
            break
        started.append(picked[1])
    return started


def test_free_slots_go_round_robin_between_tenants_with_queued_runs() -> None:
    queue: FairQueue[str] = FairQueue(share=1.0)
    queue.add("noisy", [f"n{i}" for i in range(100)])
    queue.add("quiet", ["q0"])
    queue.add("other", ["o0", "o1"])
    assert _drain(queue, 10, 6) == ["n0", "q0", "o0", "n1", "o1", "n2"]


def test_no_tenant_passes_its_share_while_another_waits() -> None:
    queue: FairQueue[str] = FairQueue(share=0.5)
    queue.add("noisy", [f"n{i}" for i in range(100)])
    assert _drain(queue, 4, 10) == ["n0", "n1", "n2", "n3", "n4", "n5", "n6", "n7", "n8", "n9"]  # alone: all
    for _ in range(10):
        queue.ended("noisy")
    for _ in range(2):
        queue.pop(4)
    assert queue.running["noisy"] == 2  # its share of 4 slots
    queue.add("quiet", ["q0", "q1", "q2"])
    assert queue.pop(4) == ("quiet", "q0")
    assert queue.pop(4) == ("quiet", "q1")
    # Both at their share (2 of 4): nobody takes a third slot while the other waits.
    assert queue.pop(4) is None
    queue.ended("noisy")
    assert queue.pop(4) == ("noisy", "n12")


def test_a_queued_run_whose_lease_was_lost_is_taken_out() -> None:
    class C:
        def __init__(self, run_id: int) -> None:
            self.run_id = run_id

    queue: FairQueue[C] = FairQueue(share=0.5)
    queue.add("t", [C(1), C(2), C(3)])
    assert [c.run_id for c in queue.remove("t", {2, 3})] == [2, 3]
    assert queue.queued("t") == 1 and queue.remove("t", {1}) and not queue


@pytest.mark.parametrize(("avg_s", "expected"), [(None, 20), (0.0005, 20), (0.3, 4), (2.0, 3), (30.0, 3)])
def test_the_run_limit_keeps_processes_busy_and_a_new_run_waiting_briefly(avg_s: float | None, expected: int) -> None:
    assert slots.run_limit(parallel=2, workers=20, avg_run_s=avg_s) == expected


def test_a_tenant_claims_only_its_share_of_the_capacity_and_refills_at_half() -> None:
    assert slots.claim_room(capacity=80, unfinished=0, tenant_unfinished=0, share=0.5) == 40
    assert slots.claim_room(capacity=80, unfinished=40, tenant_unfinished=40, share=0.5) == 0
    # Another tenant still finds room while the noisy one holds its share.
    assert slots.claim_room(capacity=80, unfinished=40, tenant_unfinished=0, share=0.5) == 40
    assert not slots.wants_refill(capacity=80, unfinished=30, tenant_unfinished=30, share=0.5)
    assert slots.wants_refill(capacity=80, unfinished=20, tenant_unfinished=20, share=0.5)
    assert slots.share_of(3, 0.1) == 1 and slots.share_of(10, 1.0) == 10


def test_a_share_outside_zero_to_one_is_refused() -> None:
    with pytest.raises(ValueError):
        FairQueue(share=0)
