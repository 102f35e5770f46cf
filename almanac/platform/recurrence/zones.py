"""IANA zones by name, validated once and cached (load() is on the hot path)."""

from __future__ import annotations

from datetime import datetime, timezone
from functools import lru_cache
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from almanac.errors import InvalidRule


@lru_cache(maxsize=512)
def _load(name: str) -> ZoneInfo | None:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        return None


def get_zone(name: str, position: int = 0) -> ZoneInfo:
    """The zone called `name`, or InvalidRule naming it."""
    zone = _load(name) if name and len(name) < 80 and ".." not in name else None
    if zone is None:
        raise InvalidRule(
            f"{name[:40]!r} is not a known IANA time zone such as Europe/Berlin.",
            details={"position": position},
        )
    return zone


def wall_utc(wall: datetime, zone: ZoneInfo | None) -> datetime:
    """A naive wall time as a naive UTC instant, honouring its `fold`
    (engine times have fold=0: the first of a repeated time; a time in a
    gap takes the offset before it, so it moves forward by the gap)."""
    if zone is None:
        return wall
    aware = wall.replace(tzinfo=zone).astimezone(timezone.utc)
    return aware.replace(tzinfo=None)


def in_gap(wall: datetime, zone: ZoneInfo | None) -> bool:
    """True if `wall` does not exist on the clock of `zone` (a spring-forward gap)."""
    if zone is None:
        return False
    back = wall.replace(tzinfo=zone, fold=0).astimezone(timezone.utc).astimezone(zone)
    return back.replace(tzinfo=None) != wall


def to_instant(wall: datetime, zone: ZoneInfo) -> datetime:
    """Wall-clock time to an aware datetime, with the SPEC's DST choices.

    fold=0 (every time the rules make) picks the first of a repeated time; fold=1 the second;
    for a time in a gap it picks the offset in force before the gap, so the round trip through
    UTC moves it forward by the gap's length.
    """
    return wall.replace(tzinfo=zone).astimezone(timezone.utc).astimezone(zone)


def to_wall(when: datetime, zone: ZoneInfo) -> datetime:
    """An aware time (or a naive wall-clock one) as naive wall-clock in `zone`."""
    if when.tzinfo is None:
        return when
    return when.astimezone(zone).replace(tzinfo=None)


def utc_key(when: datetime) -> datetime:
    """The instant of an aware time, for comparing and de-duplicating: two aware times of one zone
    compare by wall clock (PEP 495), which would confuse the two passes of a repeated hour."""
    return when.astimezone(timezone.utc)


def zone_name(when: datetime) -> str:
    """The IANA name of an aware time's zone: "UTC" for timezone.utc."""
    return getattr(when.tzinfo, "key", None) or "UTC"
