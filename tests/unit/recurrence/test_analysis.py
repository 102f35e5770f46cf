"""never_fires and too_frequent, and the time budget on hostile rules."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from almanac.errors import AlmanacError, NeverFires, TooFrequent
from almanac.platform.recurrence import parse, preview

from .conftest import NOW

NEVER = [
    pytest.param("FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=30", "February has at most 29 days", id="feb-30"),
    pytest.param("FREQ=MONTHLY;BYMONTH=4,6,9,11;BYMONTHDAY=31", "never happens", id="april-31"),
    pytest.param("FREQ=MONTHLY;BYDAY=MO;BYSETPOS=6", "at most 5", id="setpos-beyond-set"),
    pytest.param("FREQ=MONTHLY;BYDAY=6MO", "at most 5 Mondays", id="sixth-monday"),
    pytest.param("FREQ=MONTHLY;INTERVAL=12;BYMONTH=6", "only reaches November", id="interval-misses-month"),
    pytest.param("FREQ=HOURLY;INTERVAL=48;BYHOUR=3", "never land", id="hourly-grid-misses-hour"),
    pytest.param("FREQ=DAILY;INTERVAL=7;BYDAY=SU", "Friday", id="daily-7-misses-weekday"),
    pytest.param("FREQ=SECONDLY;INTERVAL=2;BYSECOND=1,3,5", "never land", id="even-steps-odd-seconds"),
    pytest.param("FREQ=YEARLY;INTERVAL=4;BYMONTH=2;BYMONTHDAY=29", "full cycle", id="every-4-years-off-leap"),
    pytest.param("FREQ=YEARLY;BYYEARDAY=366;BYMONTH=1", "full cycle", id="yearday-366-in-january"),
    pytest.param("FREQ=DAILY;UNTIL=20200101T000000Z", "before the start", id="until-before-start"),
    pytest.param("DTSTART;TZID=UTC:20200101T000000\nRRULE:FREQ=DAILY;COUNT=3", "COUNT=3", id="count-spent"),
    pytest.param("DTSTART;TZID=UTC:20200101T000000\nRRULE:FREQ=DAILY;UNTIL=20210101T000000Z",
                 "ended", id="until-spent"),
    pytest.param("2020-01-01T00:00:00Z", "in the past", id="one-off-in-the-past"),
    pytest.param("FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=30;BYHOUR=1,2", "29 days", id="feb-30-with-hours"),
    pytest.param("FREQ=YEARLY;BYMONTH=1,2;BYDAY=1MO;BYSETPOS=3", "a year has at most 2", id="setpos-past-nths"),
]


@pytest.mark.parametrize(("text", "why"), NEVER)
def test_never_fires_says_why(text: str, why: str) -> None:
    with pytest.raises(NeverFires) as err:
        preview(text, "Europe/Berlin", start=None, now=NOW)
    assert why in err.value.message


RARE = [
    pytest.param("FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=29", "2028-02-29", id="feb-29"),
    pytest.param("FREQ=MONTHLY;BYMONTH=2;BYDAY=5MO", "2044-02-29", id="fifth-monday-of-february"),
    pytest.param("FREQ=YEARLY;BYWEEKNO=53;BYDAY=MO", "2026-12-28", id="iso-week-53"),
    pytest.param("FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=29;BYDAY=MO", "2044-02-29", id="feb-29-on-monday"),
    pytest.param("FREQ=MINUTELY;BYMONTH=2;BYMONTHDAY=29;BYDAY=MO;BYHOUR=9;BYMINUTE=0", "2044-02-29",
                 id="minutely-rare-day"),
    # With BYMONTH, a yearly rule's numbered weekday is one per month allowed, not one per year:
    # these were refused as "a year has at most 1" (found by the property test against dateutil).
    pytest.param("FREQ=YEARLY;BYMONTH=1,2;BYDAY=1MO;BYSETPOS=2", "2027-02-01", id="setpos-nth-in-two-months"),
    pytest.param("FREQ=YEARLY;BYMONTH=3,6,9,12;BYDAY=-1FR;BYSETPOS=4", "2026-12-25", id="setpos-last-friday-q4"),
    pytest.param("FREQ=YEARLY;BYMONTH=1,7;BYDAY=1MO,-1FR;BYSETPOS=-1", "2027-07-30", id="setpos-two-nths-two-months"),
]


@pytest.mark.parametrize(("text", "first"), RARE)
def test_rare_rules_are_accepted(text: str, first: str) -> None:
    p = preview(text, "Europe/Berlin", start=None, now=NOW, count=2)
    assert p.next[0].date().isoformat() == first


@pytest.mark.parametrize(("text", "minimum"), [
    pytest.param("FREQ=SECONDLY;INTERVAL=30", 60, id="every-30-seconds"),
    pytest.param("* * * * * *", 60, id="cron-every-second"),
    pytest.param("FREQ=DAILY;BYHOUR=9;BYMINUTE=0;BYSECOND=0,30", 60, id="two-seconds-apart-in-a-day"),
    pytest.param("every 15 minutes", 3600, id="tenant-minimum-one-hour"),
    pytest.param("FREQ=HOURLY;BYMINUTE=59;BYSECOND=59\nRRULE:FREQ=HOURLY;BYMINUTE=0;BYSECOND=0",
                 60, id="two-rules-one-second-apart"),
])
def test_too_frequent(text: str, minimum: int) -> None:
    with pytest.raises(TooFrequent):
        preview(text, "UTC", start=None, now=NOW, min_interval_s=minimum)


@pytest.mark.parametrize("text", [
    pytest.param("FREQ=SECONDLY;BYSECOND=0", id="secondly-but-once-a-minute"),
    pytest.param("FREQ=MINUTELY", id="every-minute"),
    pytest.param("FREQ=DAILY;BYHOUR=0,23;BYMINUTE=0,59", id="hour-ends"),
])
def test_not_too_frequent_by_analysis_of_real_gaps(text: str) -> None:
    preview(text, "UTC", start=None, now=NOW, min_interval_s=60)


_LISTS = ";BYSECOND=" + ",".join(map(str, range(60))) + ";BYMINUTE=" + ",".join(
    map(str, range(60))) + ";BYHOUR=" + ",".join(map(str, range(24)))
HOSTILE = [
    "FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=30",
    "FREQ=SECONDLY;BYMONTH=2;BYMONTHDAY=30",
    "FREQ=MINUTELY;BYMONTH=2;BYMONTHDAY=29;BYDAY=MO",
    "FREQ=YEARLY;INTERVAL=4;BYMONTH=2;BYMONTHDAY=29",
    "FREQ=DAILY;INTERVAL=1000;BYMONTH=2;BYMONTHDAY=29;BYDAY=MO",
    "FREQ=SECONDLY;INTERVAL=7;BYMONTH=2;BYMONTHDAY=29;BYHOUR=3;BYMINUTE=5;BYSECOND=0",
    "FREQ=HOURLY;INTERVAL=1000003;BYMONTH=2;BYMONTHDAY=29",
    "FREQ=MINUTELY;INTERVAL=1439;BYHOUR=0;BYMINUTE=0;BYMONTHDAY=1",
    "FREQ=SECONDLY;INTERVAL=13;BYHOUR=0;BYMINUTE=0;BYSECOND=0;BYMONTHDAY=31;BYMONTH=12",
    "FREQ=SECONDLY;COUNT=1000000",
    "DTSTART;TZID=UTC:19000101T000000\nRRULE:FREQ=SECONDLY;COUNT=100000000;BYSECOND=0",
    "FREQ=YEARLY;BYSETPOS=-366;BYMONTH=2;BYMONTHDAY=29",
    "FREQ=YEARLY;BYWEEKNO=53;BYDAY=MO;BYMONTH=1",
    "FREQ=WEEKLY;INTERVAL=20871;BYMONTH=2;BYDAY=MO",
    "FREQ=SECONDLY" + _LISTS,
    "FREQ=YEARLY;BYSETPOS=-1" + _LISTS,
    "FREQ=MONTHLY;BYDAY=5MO,5TU,5WE;BYMONTH=2;BYSETPOS=3;BYHOUR=1,2,3",
    "x" * 5000,
    "every " * 600,
]


def _root_steps(monkeypatch: pytest.MonkeyPatch, evaluate: Callable[[], object]) -> int:
    """The work `evaluate` does, in budget steps charged to top-level budgets (not the clock)."""
    from almanac.platform.recurrence.engine import Budget

    spent = [0]
    tick = Budget.tick

    def counting(self: Budget) -> None:
        if self.parent is None:
            spent[0] += 1
        tick(self)

    monkeypatch.setattr(Budget, "tick", counting)
    try:
        evaluate()
    except AlmanacError:
        pass
    return spent[0]


@pytest.mark.parametrize("text", HOSTILE, ids=[f"hostile-{i}" for i in range(len(HOSTILE))])
def test_hostile_rules_answer_within_the_work_budget(text: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each hostile rule is answered (dates or a refusal) within one preview's budget of work; how long that
    takes in time is `bench/recurrence_bench.py`'s business."""
    from almanac.platform.recurrence.engine import PREVIEW_STEPS

    steps = _root_steps(monkeypatch, lambda: preview(text, "Europe/Berlin", start=None, now=NOW, count=50))
    assert steps <= 2 * PREVIEW_STEPS  # the preview's budget, plus a search or two the refusal makes


def test_scheduler_next_after_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    from almanac.platform.recurrence import next_after
    from almanac.platform.recurrence.engine import SEARCH_STEPS

    rec = parse("FREQ=MINUTELY;INTERVAL=1439;BYHOUR=0;BYMINUTE=0;BYMONTHDAY=1", "UTC", now=NOW)
    assert _root_steps(monkeypatch, lambda: next_after(rec, NOW)) <= SEARCH_STEPS + 1
