"""The cross-tenant claim path's room: within the claim capacity, refilled only once drained to half."""

import pytest

from almanac.platform.decisions.pacing import cross_room


def test_an_idle_process_claims_its_whole_capacity() -> None:
    assert cross_room(capacity=64, inflight=0, unrecorded=0) == 64


def test_it_waits_until_the_unfinished_claims_drain_to_half() -> None:
    assert cross_room(64, inflight=40, unrecorded=0) == 0
    assert cross_room(64, inflight=32, unrecorded=0) == 32


def test_finished_runs_waiting_for_the_recorder_count_up_to_twice_the_capacity() -> None:
    assert cross_room(64, inflight=100, unrecorded=90) == 28  # 10 unfinished; 2 x 64 - 100 in flight
    assert cross_room(64, inflight=128, unrecorded=128) == 0


def test_before_any_run_has_ended_a_process_holds_one_running_and_one_waiting_run_a_process() -> None:
    from almanac.platform.decisions.pacing import held_claims

    assert held_claims(None, parallel=2, run_limit=20) == 4  # not 4 x the runner's budget of 20


def test_short_runs_let_a_process_hold_what_it_starts_within_a_second_and_slow_ones_little_more_than_its_slots() -> None:
    from almanac.platform.decisions.pacing import held_claims

    assert held_claims(0.0005, parallel=20, run_limit=20) == 240  # a no-op: 12 a slot, run in a blink
    assert held_claims(0.003, parallel=2, run_limit=20) == 240  # a trivial script on 2 sandbox processes
    assert held_claims(0.010, parallel=2, run_limit=20) == 220  # 200 runs a second, and the 20 slots
    assert held_claims(0.100, parallel=2, run_limit=7) == 27
    assert held_claims(2.0, parallel=2, run_limit=3) == 4  # two-second runs: the slots, and one more
    assert held_claims(30.0, parallel=2, run_limit=2) == 2


def test_a_process_holds_no_more_than_it_has_seen_end_within_the_held_wait() -> None:
    from almanac.platform.decisions.pacing import EndRate, held_claims

    # A trivial script on 2 sandbox processes whose runs (hand-over and record included) end 19 a
    # second on a loaded box: the slots and 20 more, not 12 a slot (runs that a process killed then strands).
    assert held_claims(0.003, parallel=2, run_limit=20, ends_per_s=19.0) == 40
    assert held_claims(0.003, parallel=2, run_limit=20, ends_per_s=1000.0) == 240
    assert held_claims(2.0, parallel=2, run_limit=3, ends_per_s=100.0) == 4  # the script's own time is lower
    rate = EndRate()
    rate.ended(10.0)
    assert rate.per_s() is None
    for i in range(1, 11):
        rate.ended(10.0 + i * 0.1)
    assert rate.per_s() == 10.0


def test_what_a_process_holds_beyond_its_run_slots_is_started_within_the_held_wait() -> None:
    from hypothesis import HealthCheck, given, settings, strategies as st

    from almanac.platform.decisions import slots
    from almanac.platform.decisions.pacing import CLAIM_AHEAD_MAX, HELD_WAIT_S, held_claims

    @settings(suppress_health_check=[HealthCheck.too_slow], deadline=None)  # a shared, busy test machine
    @given(st.floats(min_value=1e-5, max_value=600), st.integers(1, 16), st.integers(1, 64))
    def held_within_the_wait(avg_run_s: float, parallel: int, workers: int) -> None:
        limit = slots.run_limit(parallel, workers, avg_run_s)
        held = held_claims(avg_run_s, parallel, limit)
        assert limit <= held <= CLAIM_AHEAD_MAX * limit
        assert (held - limit) * avg_run_s / parallel <= HELD_WAIT_S + 1e-9

    held_within_the_wait()


def test_the_timer_s_capacity_follows_its_runs_time_unless_given() -> None:
    from almanac.platform.clock import ManualClock
    from almanac.platform.runner import FunctionRunner
    from almanac.platform.timer.scheduler import across_tenants

    from datetime import datetime, timezone

    runner, clock = FunctionRunner(lambda *a: None), ManualClock(datetime(2026, 1, 1, tzinfo=timezone.utc))
    timer = across_tenants(object(), runner, clock, lambda: [], workers=8, index=object())
    assert timer.capacity == 2 * timer.parallel  # nothing has run yet
    timer._avg_run_s = 0.0005
    assert timer.capacity == 12 * timer.run_limit
    timer._avg_run_s = 2.0
    assert timer.capacity == timer.run_limit + 4  # 8 threads start 4 two-second runs within the second
    fixed = across_tenants(object(), runner, clock, lambda: [], workers=8, claim_ahead=6, index=object())
    fixed._avg_run_s = 0.0005
    assert fixed.capacity == 6 * fixed.run_limit


def test_the_end_rate_counts_runs_recorded_together_over_the_time_between_records() -> None:
    from almanac.platform.decisions.pacing import EndRate

    # The recorder records what ended in batches, each stamped once: 128 runs every half second is
    # 256 runs a second, whether the batches' runs are told one by one or all at once.
    one_by_one, at_once = EndRate(), EndRate()
    for batch in range(8):
        at = 100.0 + batch * 0.5
        for _ in range(128):
            one_by_one.ended(at)
        at_once.ended(at, 128)
    assert one_by_one.per_s() == 256.0
    assert at_once.per_s() == 256.0


def test_the_end_rate_of_a_fast_process_spans_at_least_its_minimum_and_follows_a_change_of_pace() -> None:
    from almanac.platform.decisions.pacing import EndRate

    rate = EndRate()
    for i in range(2000):  # 1,000 runs a second, recorded 10 at a time every 10 ms
        rate.ended(i * 0.01, 10)
    assert rate.per_s() == pytest.approx(1000.0)
    for i in range(1, 301):  # then 20 a second, one at a time: the last 256 runs tell
        rate.ended(20.0 + i * 0.05)
    assert rate.per_s() == pytest.approx(20.0)


def test_the_end_rate_says_nothing_before_its_ends_span_its_minimum() -> None:
    from almanac.platform.decisions.pacing import EndRate

    rate = EndRate()
    rate.ended(5.0, 300)
    assert rate.per_s() is None  # one batch: no time between records yet
    rate.ended(5.2, 40)
    assert rate.per_s() is None  # 0.2 s says too little
    rate.ended(5.5, 60)
    assert rate.per_s() == pytest.approx(200.0)  # the 100 recorded after the first record, in 0.5 s
