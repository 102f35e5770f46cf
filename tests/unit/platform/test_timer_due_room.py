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


def test_before_any_run_has_ended_a_process_holds_four_claims_a_slot() -> None:
    from almanac.platform.timer_due import claim_ahead

    assert claim_ahead(None, parallel=2, run_limit=20) == 4


def test_short_runs_let_a_process_hold_more_claims_a_slot_and_slow_ones_keep_four() -> None:
    from almanac.platform.timer_due import claim_ahead

    assert claim_ahead(0.0005, parallel=20, run_limit=20) == 12  # a no-op: what it holds runs in a blink
    assert claim_ahead(0.003, parallel=2, run_limit=20) == 12  # a trivial script on 2 sandbox processes
    assert claim_ahead(0.010, parallel=2, run_limit=20) == 10  # 200 runs a second: 10 x 20 held is 1 s
    assert claim_ahead(0.100, parallel=2, run_limit=7) == 4
    assert claim_ahead(30.0, parallel=2, run_limit=2) == 4


def test_what_a_process_holds_above_four_a_slot_is_run_within_the_held_wait() -> None:
    from hypothesis import given, strategies as st

    from almanac.platform import slots
    from almanac.platform.timer_due import CLAIM_AHEAD, HELD_WAIT_S, claim_ahead

    @given(st.floats(min_value=1e-5, max_value=600), st.integers(1, 16), st.integers(1, 64))
    def held_within_the_wait(avg_run_s: float, parallel: int, workers: int) -> None:
        limit = slots.run_limit(parallel, workers, avg_run_s)
        ahead = claim_ahead(avg_run_s, parallel, limit)
        assert CLAIM_AHEAD <= ahead <= 12
        if ahead > CLAIM_AHEAD:
            assert ahead * limit * avg_run_s / max(1, parallel) <= HELD_WAIT_S + 1e-9

    held_within_the_wait()


def test_the_timer_s_capacity_follows_its_runs_time_unless_given() -> None:
    from almanac.platform.clock import ManualClock
    from almanac.platform.runner import FunctionRunner
    from almanac.platform.timer_due import CrossTenantScheduler

    from datetime import datetime, timezone

    runner, clock = FunctionRunner(lambda *a: None), ManualClock(datetime(2026, 1, 1, tzinfo=timezone.utc))
    timer = CrossTenantScheduler(object(), runner, clock, lambda: [], workers=8)
    assert timer.capacity == 4 * timer.run_limit  # nothing has run yet
    timer._avg_run_s = 0.0005
    assert timer.capacity == 12 * timer.run_limit
    timer._avg_run_s = 2.0
    assert timer.capacity == 4 * timer.run_limit
    fixed = CrossTenantScheduler(object(), runner, clock, lambda: [], workers=8, claim_ahead=6)
    fixed._avg_run_s = 0.0005
    assert fixed.capacity == 6 * fixed.run_limit
