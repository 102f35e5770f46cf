"""Time `preview()` on ordinary and hostile rules, beside plain python-dateutil.

Run: python bench/recurrence_bench.py [--repeat N]

For each rule: our preview (parse + never-fires + too-frequent + describe +
next 10 dates) timed N times (median, p99, max), and python-dateutil asked
for the same first 10 occurrences in a child process killed after 10 s.
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

from almanac.errors import AlmanacError  # noqa: E402
from almanac.platform.recurrence import preview  # noqa: E402

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


if __name__ == "__main__":
    main()
