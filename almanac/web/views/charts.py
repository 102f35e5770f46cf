"""The dashboard's numbers: runs per day by status and duration p50/p95 per day, failing schedules.

Pure functions of rows already read (and of the viewer's zone), so they are tested without a
database. Charts are drawn by the template as SVG from the geometry computed here; each status
group has a pattern as well as a colour, and every chart has a text table beside it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta, tzinfo
from typing import Any

FAILED = ("failed", "timed_out", "memory_exceeded")
# Three groups a chart can show apart without colour: solid, hatched, dotted.
GROUPS = (("succeeded", ("succeeded",)), ("failed", FAILED), ("other", ("skipped", "expired", "cancelled")))
WIDTH, HEIGHT, PAD_LEFT, PAD_RIGHT, PAD_BOTTOM, PAD_TOP = 720, 200, 44, 24, 22, 12


@dataclass
class Day:
    day: date
    counts: dict[str, int] = field(default_factory=dict)  # by group
    durations: list[int] = field(default_factory=list)

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def percentile(self, p: float) -> int | None:
        return percentile(self.durations, p)


def percentile(values: Sequence[int], p: float) -> int | None:
    """Nearest-rank percentile (the smallest value with at least p% at or below it)."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(p / 100 * len(ordered)))
    return ordered[rank - 1]


def _group(status: str) -> str | None:
    for name, statuses in GROUPS:
        if status in statuses:
            return name
    return None  # pending / running: not finished, not counted


def per_day(rows: Iterable[tuple[datetime, str, int | None]], now: datetime, zone: tzinfo,
            days: int = 30) -> list[Day]:
    """`rows` are (created_at, status, duration_ms); days are the viewer's, the last `days` up to today."""
    today = now.astimezone(zone).date()
    out = {today - timedelta(days=i): Day(today - timedelta(days=i)) for i in range(days)}
    for created, status, duration in rows:
        day = out.get(created.astimezone(zone).date())
        group = _group(status)
        if day is None or group is None:
            continue
        day.counts[group] = day.counts.get(group, 0) + 1
        if duration is not None and status not in ("skipped", "expired", "cancelled"):
            day.durations.append(duration)
    return [out[d] for d in sorted(out)]


def nice_max(value: float) -> int:
    """A round axis maximum at or above `value` (1, 2, 5 × 10^n)."""
    if value <= 0:
        return 1
    base = 10 ** math.floor(math.log10(value))
    for step in (1, 2, 5, 10):
        if step * base >= value:
            return int(step * base)
    return int(10 * base)  # pragma: no cover


def bar_chart(days: list[Day]) -> dict[str, Any]:
    """Stacked bars per day: x, width and (y, height) per group, plus the axis maximum."""
    top = nice_max(max((d.total for d in days), default=0))
    inner_h, inner_w = HEIGHT - PAD_BOTTOM - PAD_TOP, WIDTH - PAD_LEFT - PAD_RIGHT
    slot = inner_w / max(len(days), 1)
    bars = []
    for i, day in enumerate(days):
        y: float = HEIGHT - PAD_BOTTOM
        parts = []
        for name, _ in GROUPS:
            h = day.counts.get(name, 0) / top * inner_h
            if h > 0:
                y -= h
                parts.append({"group": name, "y": round(y, 1), "h": round(h, 1), "n": day.counts[name]})
        bars.append({"x": round(PAD_LEFT + i * slot + slot * 0.15, 1), "w": round(slot * 0.7, 1), "day": day,
                     "parts": parts, "label": i % 5 == 0 or i == len(days) - 1})
    return {"bars": bars, "top": top, "width": WIDTH, "height": HEIGHT, "base": HEIGHT - PAD_BOTTOM,
            "left": PAD_LEFT, "mid": round(HEIGHT - PAD_BOTTOM - inner_h / 2, 1), "top_y": PAD_TOP}


def line_chart(days: list[Day]) -> dict[str, Any]:
    """Two lines (p50, p95) over the days that had runs; gaps stay gaps."""
    values = {p: [d.percentile(p) for d in days] for p in (50, 95)}
    top = nice_max(max((v for v in values[95] if v is not None), default=0))
    inner_h, inner_w = HEIGHT - PAD_BOTTOM - PAD_TOP, WIDTH - PAD_LEFT - PAD_RIGHT
    slot = inner_w / max(len(days), 1)

    def points(p: int) -> list[dict[str, Any]]:
        return [{"x": round(PAD_LEFT + (i + 0.5) * slot, 1), "y": round(HEIGHT - PAD_BOTTOM - v / top * inner_h, 1),
                 "v": v, "day": days[i].day} for i, v in enumerate(values[p]) if v is not None]

    return {"p50": points(50), "p95": points(95), "top": top, "width": WIDTH, "height": HEIGHT,
            "base": HEIGHT - PAD_BOTTOM, "left": PAD_LEFT, "top_y": PAD_TOP,
            "mid": round(HEIGHT - PAD_BOTTOM - inner_h / 2, 1),
            "labels": [{"x": round(PAD_LEFT + (i + 0.5) * slot, 1), "day": d.day}
                       for i, d in enumerate(days) if i % 5 == 0 or i == len(days) - 1]}


@dataclass
class Failing:
    schedule_id: int
    streak: int
    last_error: str | None
    last_run_id: int


def failing_schedules(rows: Iterable[tuple[int, int | None, int, str, str | None]]) -> list[Failing]:
    """Schedules whose latest finished occurrences failed, longest streak first.

    `rows` are (run id, occurrence id, schedule id, status, error), newest first. An occurrence counts
    once, by its newest attempt; runs still going and skipped/expired/cancelled ones neither extend nor
    break a streak; a success ends it.
    """
    seen: set[int] = set()
    history: dict[int, list[tuple[int, str, str | None]]] = {}
    for run_id, occurrence_id, schedule_id, status, error in rows:
        if occurrence_id is not None:
            if occurrence_id in seen:
                continue  # an earlier attempt of an occurrence already counted by its newest
            seen.add(occurrence_id)
        if status in FAILED or status == "succeeded":
            history.setdefault(schedule_id, []).append((run_id, status, error))
    found = []
    for schedule_id, runs in history.items():
        streak = 0
        for _run_id, status, _error in runs:
            if status == "succeeded":
                break
            streak += 1
        if streak:
            found.append(Failing(schedule_id, streak, runs[0][2], runs[0][0]))
    return sorted(found, key=lambda f: (-f.streak, -f.last_run_id))
