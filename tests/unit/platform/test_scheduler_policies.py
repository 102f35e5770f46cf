"""Every policy decision, as a pure function of (state, now), with a manual clock."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from almanac.platform.decisions import policies
from almanac.platform.clock import ManualClock
from almanac.platform.decisions.policies import Policy

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=timezone.utc)


def minutes(*offsets: int) -> list[datetime]:
    return [T0 + timedelta(minutes=m) for m in offsets]


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(T0)


def test_on_time_occurrence_runs_whatever_the_misfire_policy(clock: ManualClock) -> None:
    clock.advance(0.5)
    for misfire in policies.MISFIRE_CHOICES:
        plan = policies.plan_misfire(Policy(misfire=misfire), minutes(0), clock.now())
        assert plan.run == minutes(0) and not plan.skipped and not plan.expired


def test_a_little_late_is_not_a_misfire(clock: ManualClock) -> None:
    clock.advance(policies.MISFIRE_GRACE_S - 1)
    plan = policies.plan_misfire(Policy(misfire="skip"), minutes(0), clock.now())
    assert plan.run == minutes(0)


def test_run_once_runs_the_latest_missed_and_records_the_others_skipped(clock: ManualClock) -> None:
    clock.advance(minutes=10)
    plan = policies.plan_misfire(Policy(misfire="run_once"), minutes(*range(0, 11)), clock.now())
    # 09:10 is on time; 09:00-09:09 were missed: one catch-up run carries the latest of them.
    assert plan.run == minutes(9, 10)
    assert plan.skipped == minutes(*range(0, 9))
    assert plan.expired == []


def seconds(*offsets: int) -> list[datetime]:
    return [T0 + timedelta(seconds=s) for s in offsets]


@pytest.mark.parametrize(("misfire", "run", "skipped"), [
    ("skip", [12], [2, 4, 6, 8, 10]),
    ("run_once", [10, 12], [2, 4, 6, 8]),
    ("run_all", [2, 4, 6, 8, 10, 12], []),
], ids=["skip", "run_once", "run_all"])
def test_a_frequent_schedule_misses_what_its_next_occurrence_overtook(
        clock: ManualClock, misfire: str, run: list[int], skipped: list[int]) -> None:
    # Every 2 s, down for 10 s: each of 2..10 could not start before the next fell due (all
    # well under 60 s late), so each is missed; 12 is due right now and on time.
    clock.advance(seconds=12)
    plan = policies.plan_misfire(Policy(misfire=misfire), seconds(2, 4, 6, 8, 10, 12), clock.now())
    assert (plan.run, plan.skipped, plan.expired) == (seconds(*run), seconds(*skipped), [])


def test_the_last_due_time_is_missed_once_more_than_the_grace_late(clock: ManualClock) -> None:
    clock.advance(seconds=policies.MISFIRE_GRACE_S + 1)
    plan = policies.plan_misfire(Policy(misfire="skip"), minutes(0), clock.now())
    assert plan.run == [] and plan.skipped == minutes(0)
    plan = policies.plan_misfire(Policy(misfire="run_once"), minutes(0), clock.now())
    assert plan.run == minutes(0) and plan.skipped == []


def test_run_all_runs_each_missed_in_order(clock: ManualClock) -> None:
    clock.advance(minutes=3)
    plan = policies.plan_misfire(Policy(misfire="run_all"), minutes(0, 1, 2, 3), clock.now())
    assert plan.run == minutes(0, 1, 2, 3)


def test_skip_runs_only_what_is_not_missed(clock: ManualClock) -> None:
    clock.advance(minutes=3, seconds=1)
    plan = policies.plan_misfire(Policy(misfire="skip"), minutes(0, 1, 2, 3), clock.now())
    assert plan.run == minutes(3)
    assert plan.skipped == minutes(0, 1, 2)


@pytest.mark.parametrize("misfire", policies.MISFIRE_CHOICES)
def test_occurrences_older_than_the_catchup_window_expire(clock: ManualClock, misfire: str) -> None:
    clock.advance(minutes=10)
    plan = policies.plan_misfire(Policy(misfire=misfire, catchup_window_s=300), minutes(*range(0, 11)), clock.now())
    assert plan.expired == minutes(0, 1, 2, 3, 4)
    assert set(plan.run) | set(plan.skipped) == set(minutes(5, 6, 7, 8, 9, 10))


def test_a_single_occurrence_missed_past_the_window_expires(clock: ManualClock) -> None:
    clock.advance(hours=30)
    plan = policies.plan_misfire(Policy(), minutes(0), clock.now())
    assert plan.expired == minutes(0) and plan.run == []


def test_expire_after_applies_to_first_attempts_only(clock: ManualClock) -> None:
    policy = Policy(expire_after_s=30)
    clock.advance(30)
    assert not policies.is_expired(policy, T0, clock.now(), attempt=1)
    clock.advance(1)
    assert policies.is_expired(policy, T0, clock.now(), attempt=1)
    assert not policies.is_expired(policy, T0, clock.now(), attempt=2)
    assert not policies.is_expired(Policy(), T0, clock.now() + timedelta(days=9), attempt=1)


@pytest.mark.parametrize(
    ("overlap", "busy", "catch_up", "expected"),
    [
        ("skip", False, False, "run"),
        ("skip", True, False, "skip"),
        ("queue", True, False, "queue"),
        ("allow", True, False, "run"),
        ("skip", True, True, "queue"),
        ("allow", True, True, "run"),
    ],
)
def test_overlap(overlap: str, busy: bool, catch_up: bool, expected: str) -> None:
    assert policies.decide_overlap(Policy(overlap=overlap), busy, catch_up=catch_up) == expected


def test_retry_backoff_doubles_until_attempts_run_out(clock: ManualClock) -> None:
    policy = Policy(max_attempts=4, retry_backoff_s=10)
    now = clock.now()
    assert policies.retry_at(policy, "failed", 1, now) == now + timedelta(seconds=10)
    assert policies.retry_at(policy, "timed_out", 2, now) == now + timedelta(seconds=20)
    assert policies.retry_at(policy, "memory_exceeded", 3, now) == now + timedelta(seconds=40)
    assert policies.retry_at(policy, "failed", 4, now) is None
    assert policies.retry_at(policy, "succeeded", 1, now) is None


def test_backoff_is_capped() -> None:
    policy = Policy(max_attempts=100, retry_backoff_s=3600)
    assert policies.retry_at(policy, "failed", 60, T0) == T0 + timedelta(seconds=policies.MAX_BACKOFF_S)


def test_lease_is_timeout_plus_margin() -> None:
    assert policies.lease_until(T0, 1500, 30) == T0 + timedelta(seconds=31.5)


def test_follow_up_guards(clock: ManualClock) -> None:
    now = clock.now()
    assert policies.follow_up_problem(1, now + timedelta(days=1), now, 0) is None
    assert policies.follow_up_problem(policies.MAX_FOLLOW_UPS, now, now, 0) is None
    assert "chain" in policies.follow_up_problem(policies.MAX_FOLLOW_UPS + 1, now, now, 0)
    assert "days ahead" in policies.follow_up_problem(1, now + timedelta(days=367), now, 0)
    assert "at most" in policies.follow_up_problem(1, now, now, policies.MAX_SCHEDULE_AT_PER_RUN)



def test_policy_refuses_unknown_choices() -> None:
    with pytest.raises(ValueError):
        Policy(misfire="sometimes")
    with pytest.raises(ValueError):
        Policy(overlap="maybe")


def test_a_lease_claimed_within_the_last_round_is_left_for_the_next_round() -> None:
    every, margin, timeout = timedelta(seconds=10), 30.0, 1000
    claimed = policies.lease_until(T0, timeout, margin)
    assert not policies.renewal_due(claimed, T0, timeout, margin, every)
    assert not policies.renewal_due(claimed, T0 + every - timedelta(milliseconds=1), timeout, margin, every)
    assert policies.renewal_due(claimed, T0 + every, timeout, margin, every)
    assert policies.renewal_due(claimed, T0 + 5 * every, timeout, margin, every)  # late, or lapsed: renew (or learn it is lost)


@given(held_ago_s=st.floats(min_value=0, max_value=120), timeout_ms=st.integers(min_value=1, max_value=900_000),
       every_s=st.floats(min_value=0.1, max_value=60))
def test_a_lease_left_for_the_next_round_still_has_its_timeout_and_a_round_then(
        held_ago_s: float, timeout_ms: int, every_s: float) -> None:
    """With rounds a third of the margin apart (the default), a skipped lease is renewed at the next
    round with at least the script's timeout plus one round left."""
    every = timedelta(seconds=every_s)
    margin = 3 * every_s
    held = policies.lease_until(T0 - timedelta(seconds=held_ago_s), timeout_ms, margin)
    if not policies.renewal_due(held, T0, timeout_ms, margin, every):
        assert held - (T0 + every) >= timedelta(milliseconds=timeout_ms) + every - timedelta(microseconds=1)
