"""Time `preview()` on ordinary and hostile rules, beside plain python-dateutil.

Run: python bench/recurrence_bench.py [--repeat N]

For each rule: our preview (parse + never-fires + too-frequent + describe +
next 10 dates) timed N times (median, p99, max), and python-dateutil asked
for the same first 10 occurrences in a child process killed after 10 s.

Then the bound: the hostile BY* product family (every value of every BY
part, with the tenant's 60 s minimum interval and with 1 s) and rules with a
business calendar (the preview, then the calendar's never-fires check and its
verdict on the next 10 dates), each with its worst time and its peak memory
(tracemalloc, one separate run) against the 100 ms a preview may take.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import statistics
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import tracemalloc  # noqa: E402
from datetime import date  # noqa: E402
from typing import Callable  # noqa: E402

from almanac.errors import AlmanacError  # noqa: E402
from almanac.platform.recurrence import preview  # noqa: E402
from almanac.platform.recurrence.api import parse  # noqa: E402
from almanac.platform.recurrence.calendars import BusinessCalendar, ClosedDays  # noqa: E402
from almanac.platform.recurrence.engine import PREVIEW_STEPS, budget_scope  # noqa: E402
from almanac.platform.recurrence.occurrences import occurrences  # noqa: E402
from almanac.platform.recurrence.roll import ensure_fires_with_calendar, roll  # noqa: E402

NOW = datetime(2026, 11, 20, 10, 7, 33, tzinfo=timezone.utc)
DATEUTIL_CAP_S = 10.0

ORDINARY = [
    "FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR;BYHOUR=9;BYMINUTE=0",
    "FREQ=MONTHLY;BYDAY=-1FR;BYHOUR=12;BYMINUTE=0",
    "FREQ=WEEKLY;INTERVAL=2;BYDAY=MO,FR;BYHOUR=17;BYMINUTE=30",
    "FREQ=MINUTELY;INTERVAL=15",
    "FREQ=MONTHLY;BYDAY=MO,TU,WE,TH,FR;BYSETPOS=-1",
    "FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=29",
    "FREQ=MONTHLY;BYMONTH=2;BYDAY=5MO",
    "FREQ=YEARLY;BYWEEKNO=53;BYDAY=MO",
    "FREQ=DAILY;BYHOUR=9,17;BYMINUTE=0,30",
]
ENGLISH_AND_CRON = [
    "every weekday at 9am",
    "the last Friday of every month at noon",
    "every 2 weeks on Monday and Friday at 17:30",
    "0 9 * * 1-5",
    "*/15 * * * *",
    "0 0 */3 * *",
    "0 0 1-5 * */2",
    "every day at 10, 12 and 17",
    "every hour between 9 and 5 on weekdays",
    "every 5 minutes from 3pm to 3:55pm on weekdays",
    "the last weekday of the month at 6pm",
    "every day except sunday at 8am; except on December 1, 2026 at 8:00 AM",
    "every weekday at 9am except holidays",
    "DTSTART;TZID=Europe/Berlin:20270326T023000\nRRULE:FREQ=DAILY;COUNT=10",
    "FREQ=HOURLY;BYMINUTE=0,30;BYSETPOS=-1",
]
HOSTILE = [
    "FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=30",
    "FREQ=MONTHLY;BYMONTH=4,6,9,11;BYMONTHDAY=31",
    "FREQ=YEARLY;INTERVAL=4;BYMONTH=2;BYMONTHDAY=29",
    "FREQ=YEARLY;BYYEARDAY=366;BYMONTH=1",
    "FREQ=MONTHLY;INTERVAL=12;BYMONTH=6",
    "FREQ=MINUTELY;BYMONTH=2;BYMONTHDAY=29;BYDAY=MO",
    "FREQ=SECONDLY;BYMONTH=2;BYMONTHDAY=30",
    "FREQ=DAILY;INTERVAL=1000;BYMONTH=2;BYMONTHDAY=29;BYDAY=MO",
    "FREQ=HOURLY;INTERVAL=1000003;BYMONTH=2;BYMONTHDAY=29",
    "FREQ=SECONDLY;INTERVAL=7;BYMONTH=2;BYMONTHDAY=29;BYHOUR=3;BYMINUTE=5;BYSECOND=0",
    "FREQ=MINUTELY;INTERVAL=1439;BYHOUR=0;BYMINUTE=0;BYMONTHDAY=1",
    "FREQ=HOURLY;INTERVAL=48;BYHOUR=3",
    # every second of a year, and of a month: the period's BY* product is walked, never built
    "FREQ=YEARLY;BYMONTH=" + ",".join(map(str, range(1, 13))) + ";BYMONTHDAY=" + ",".join(map(str, range(1, 32)))
    + ";BYHOUR=" + ",".join(map(str, range(24))) + ";BYMINUTE=" + ",".join(map(str, range(60)))
    + ";BYSECOND=" + ",".join(map(str, range(60))),
    "FREQ=MONTHLY;BYHOUR=" + ",".join(map(str, range(24))) + ";BYMINUTE=" + ",".join(map(str, range(60)))
    + ";BYSECOND=" + ",".join(map(str, range(60))),
]


BOUND_MS = 100.0


def _all(name: str, low: int, high: int) -> str:
    return f";{name}=" + ",".join(map(str, range(low, high + 1)))


_TIMES = _all("BYHOUR", 0, 23) + _all("BYMINUTE", 0, 59) + _all("BYSECOND", 0, 59)
# Every value of every BY part: the period's product (31 million per year) is walked, never built.
BY_PRODUCT = [
    "FREQ=YEARLY" + _all("BYMONTH", 1, 12) + _all("BYMONTHDAY", 1, 31) + _TIMES,
    "FREQ=YEARLY" + _all("BYMONTH", 1, 12) + _all("BYMONTHDAY", 1, 31) + _TIMES + ";BYSETPOS=-1",
    "FREQ=YEARLY" + _all("BYMONTH", 1, 12) + _all("BYMONTHDAY", 1, 31) + _TIMES + ";BYSETPOS=1,-1",
    "FREQ=YEARLY" + _all("BYMONTH", 1, 12) + _all("BYMONTHDAY", 1, 31) + _all("BYHOUR", 0, 23)
    + _all("BYMINUTE", 0, 59),
    "FREQ=YEARLY" + _all("BYMONTH", 1, 12) + ";BYMONTHDAY=" + ",".join(
        str(d) for d in [*range(-31, 0), *range(1, 32)]) + _TIMES,
    "FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=30" + _TIMES,
    "FREQ=MONTHLY" + _all("BYMONTHDAY", 1, 31) + _TIMES,
    "FREQ=YEARLY" + _all("BYYEARDAY", 1, 366) + _TIMES,
    "FREQ=YEARLY" + _all("BYWEEKNO", 1, 53) + ";BYDAY=MO,TU,WE,TH,FR,SA,SU" + _TIMES,
]
# English rules with a business calendar: (phrase, calendar used for an unnamed or tenant one).
_BAVARIA = BusinessCalendar("bench", "DE", "BY")
_SHUT = BusinessCalendar("shut", "DE", None, (ClosedDays(date(2026, 11, 1), date(2027, 10, 31)),))
CALENDAR_RULES = [
    ("every business day at 8", _BAVARIA),
    ("every weekday at 9am except holidays in Bavaria, Germany", _BAVARIA),
    ("the last business day of every month at 17:00 in Germany", _BAVARIA),
    ("the first business day of every month at 6", _BAVARIA),
    ("on the 25th of every month at 10, or the business day before if it is not a business day "
     "in DE-BY", _BAVARIA),
    ("on the 25th of every month at 10, or the next business day", _BAVARIA),
    ("every day at 9 except holidays in shut", _SHUT),
    ("every weekday at 9am, or the next business day in shut", _SHUT),
    ("every minute except holidays", _SHUT),
]


def _with_calendar(text: str, cal: BusinessCalendar) -> str:
    """The preview, then what the calendar does: its never-fires check and the next 10 dates."""
    found = preview(text, "Europe/Berlin", start=None, now=NOW, count=10, min_interval_s=60)
    rec = parse(text, "Europe/Berlin", now=NOW)
    assert rec.calendar is not None
    with budget_scope(PREVIEW_STEPS):
        ensure_fires_with_calendar(rec, cal, rec.calendar.policy, NOW)
        rolled = list(roll(occurrences(rec, after=NOW, count=10), cal, rec.calendar.policy))
    kept = sum(r.action != "skipped" for r in rolled)
    return f"{len(found.next)} dates, {kept} run"


def _worst(call: Callable[[], str], repeat: int) -> tuple[float, int, str]:
    """Worst time (s) of `repeat` runs after one warm-up, peak bytes of one more, and its outcome."""
    def once() -> str:
        try:
            return call()
        except AlmanacError as err:
            return err.code
    outcome = once()  # warms the caches and the holiday library's country module
    worst = 0.0
    for _ in range(repeat):
        started = time.perf_counter()
        once()
        worst = max(worst, time.perf_counter() - started)
    tracemalloc.start()
    once()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return worst, peak, outcome


def bound(repeat: int) -> None:
    print(f"\n[bound] worst of {repeat} and peak memory, against {BOUND_MS:.0f} ms")
    rows: list[tuple[str, Callable[[], str]]] = []
    for rule in BY_PRODUCT:
        for minimum in (60, 1):
            rows.append((f"min {minimum:>2}s {rule[:50]}", lambda r=rule, m=minimum: _preview_outcome(r, m)))
    for text, cal in CALENDAR_RULES:
        rows.append((f"calendar {text[:51]}", lambda t=text, c=cal: _with_calendar(t, c)))
    overall = 0.0
    for label, call in rows:
        worst, peak, outcome = _worst(call, repeat)
        overall = max(overall, worst)
        verdict = "ok" if worst * 1000 <= BOUND_MS else "OVER"
        print(f"{label:62} worst {worst * 1000:7.2f}ms  peak {peak / 1024:8.0f} KiB  {verdict:4} {outcome}")
    print(f"worst of the bound rows: {overall * 1000:.2f} ms (bound {BOUND_MS:.0f} ms)")


def _preview_outcome(rule: str, minimum: int) -> str:
    return f"{len(preview(rule, 'Europe/Berlin', start=None, now=NOW, count=10, min_interval_s=minimum).next)} dates"


def _ours(rule: str, repeat: int) -> tuple[list[float], str]:
    outcome = ""
    times = []
    for _ in range(repeat + 1):
        started = time.perf_counter()
        try:
            found = preview(rule, "Europe/Berlin", start=None, now=NOW, count=10)
            outcome = f"{len(found.next)} dates"
        except AlmanacError as err:
            outcome = err.code
        times.append(time.perf_counter() - started)
    return times[1:], outcome  # the first call warms the caches


def _dateutil_child(rule: str, queue: mp.Queue) -> None:
    from dateutil.rrule import rrulestr

    started = time.perf_counter()
    try:
        it = iter(rrulestr(f"DTSTART:{NOW:%Y%m%dT%H%M%S}\nRRULE:{rule}"))
        found = [x for _, x in zip(range(10), it)]
    except ValueError as err:  # dateutil refuses some empty rules outright
        queue.put((time.perf_counter() - started, f"ValueError: {str(err)[:30]}"))
        return
    queue.put((time.perf_counter() - started, f"{len(found)} dates"))


def _dateutil(rule: str) -> str:
    if not rule.startswith("FREQ="):
        return "n/a (not RFC 5545)"
    queue: mp.Queue = mp.Queue()
    child = mp.Process(target=_dateutil_child, args=(rule, queue))
    child.start()
    child.join(DATEUTIL_CAP_S)
    if child.is_alive():
        child.kill()
        child.join()
        return f"> {DATEUTIL_CAP_S:.0f} s (gave up)"
    if queue.empty():
        return "error"
    seconds, what = queue.get()
    return f"{seconds * 1000:9.1f} ms ({what})"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--no-dateutil", action="store_true")
    args = parser.parse_args()
    header = f"{'rule':62} {'ours median':>11} {'p99':>8} {'max':>8}  {'result':12} dateutil"
    print(header)
    print("-" * len(header))
    every: list[float] = []
    for group, rules in (("ordinary", ORDINARY), ("english/cron", ENGLISH_AND_CRON),
                         ("hostile", HOSTILE)):
        print(f"[{group}]")
        for rule in rules:
            times, outcome = _ours(rule, args.repeat)
            every += times
            ordered = sorted(times)
            p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
            theirs = "skipped" if args.no_dateutil else _dateutil(rule)
            print(f"{rule[:62]:62} {statistics.median(times) * 1000:9.2f}ms "
                  f"{p99 * 1000:6.2f}ms {max(times) * 1000:6.2f}ms  {outcome:12} {theirs}")
    every.sort()
    print("-" * len(header))
    print(f"all previews: median {statistics.median(every) * 1000:.2f} ms, "
          f"p99 {every[int(len(every) * 0.99)] * 1000:.2f} ms, max {every[-1] * 1000:.2f} ms "
          f"({len(every)} previews)")
    bound(max(5, args.repeat // 3))


if __name__ == "__main__":
    main()
