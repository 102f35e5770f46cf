"""The evaluation budget counts work, not time: a slow machine gets the same
answer as a fast one (issue 16: a valid yearly BYWEEKNO rule came back
`invalid_rule` under load)."""

from __future__ import annotations

import itertools
import time
from datetime import datetime, timezone

import pytest

from almanac.errors import InvalidRule
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
