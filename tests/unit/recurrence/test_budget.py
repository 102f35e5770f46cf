"""The evaluation budget counts work, not time: a slow machine gets the same
answer as a fast one (a valid yearly BYWEEKNO rule came back
`invalid_rule` under load)."""

from __future__ import annotations

import itertools
import time
from datetime import datetime, timezone

import pytest

from almanac.errors import InvalidRule, TooFrequent
from almanac.platform.recurrence import preview
from almanac.platform.recurrence.engine import Budget, SearchTooLong, budget_scope

NOW = datetime(2026, 11, 20, 10, 7, 33, tzinfo=timezone.utc)
RULES = [
    "FREQ=YEARLY;BYWEEKNO=53;BYDAY=MO",
    "FREQ=YEARLY;BYWEEKNO=1,20;BYDAY=MO;BYHOUR=9",
    "FREQ=MONTHLY;BYDAY=MO,TU,WE,TH,FR;BYSETPOS=-1",
    "FREQ=MINUTELY;INTERVAL=1439;BYHOUR=0;BYMINUTE=0;BYMONTHDAY=1",
]


def _answer(rule: str) -> object:
    try:
        return preview(rule, "Europe/Berlin", start=None, now=NOW, count=10).next
    except InvalidRule as err:
        return err.code


@pytest.mark.parametrize("rule", RULES)
def test_a_busy_machine_gets_the_same_answer(rule: str, monkeypatch: pytest.MonkeyPatch) -> None:
    calm = _answer(rule)
    ticks = itertools.count()
    # Every reading of the clock says another second has passed: a machine
    # so busy that any wall-clock budget is spent at once.
    monkeypatch.setattr(time, "perf_counter", lambda: float(next(ticks)))
    monkeypatch.setattr(time, "monotonic", lambda: float(next(ticks)))
    assert _answer(rule) == calm
    assert calm != "invalid_rule"


def test_budget_is_a_count_of_steps_shared_with_its_scope() -> None:
    with budget_scope(10) as outer:
        inner = outer.sub(100)
        for _ in range(10):
            inner.tick()
        with pytest.raises(SearchTooLong):
            inner.tick()  # the scope's ten steps are spent
    small = Budget(3)
    for _ in range(3):
        small.tick()
    with pytest.raises(SearchTooLong):
        small.tick()


def _every(name: str, values: range) -> str:
    return f"{name}=" + ",".join(map(str, values))


EVERY_SECOND_OF_A_YEAR = ";".join(["FREQ=YEARLY", _every("BYMONTH", range(1, 13)), _every("BYMONTHDAY", range(1, 32)),
                                   _every("BYHOUR", range(24)), _every("BYMINUTE", range(60)),
                                   _every("BYSECOND", range(60))])
EVERY_SECOND_OF_A_MONTH = ";".join(["FREQ=MONTHLY", _every("BYHOUR", range(24)), _every("BYMINUTE", range(60)),
                                    _every("BYSECOND", range(60))])


@pytest.mark.parametrize("rule", [EVERY_SECOND_OF_A_YEAR, EVERY_SECOND_OF_A_MONTH], ids=["year", "month"])
def test_a_period_of_every_second_is_walked_within_the_budget_and_bounded_memory(rule: str) -> None:
    """A period's BY* product (31 million times for a year) is taken one time at a time, each
    counted by the budget, never built: refused at once as too frequent, listed at a 1 s minimum."""
    import tracemalloc

    tracemalloc.start()
    try:
        with pytest.raises(TooFrequent):
            preview(rule, "Europe/Berlin", start=None, now=NOW, count=10, min_interval_s=60)
        found = preview(rule, "Europe/Berlin", start=None, now=NOW, count=3, min_interval_s=1).next
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert [int((d - NOW).total_seconds()) for d in found] == [0, 1, 2]
    assert peak < 8 * 2**20, f"{peak / 2**20:.1f} MiB"
