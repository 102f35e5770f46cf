"""The cross-tenant timer's room: within the claim capacity, refilled only once drained to half."""

from almanac.platform.timer_due import cross_room


def test_an_idle_process_claims_its_whole_capacity() -> None:
    assert cross_room(capacity=64, inflight=0, unrecorded=0) == 64


def test_it_waits_until_the_unfinished_claims_drain_to_half() -> None:
    assert cross_room(64, inflight=40, unrecorded=0) == 0
    assert cross_room(64, inflight=32, unrecorded=0) == 32


def test_finished_runs_waiting_for_the_recorder_count_up_to_twice_the_capacity() -> None:
    assert cross_room(64, inflight=100, unrecorded=90) == 28  # 10 unfinished; 2 x 64 - 100 in flight
    assert cross_room(64, inflight=128, unrecorded=128) == 0
