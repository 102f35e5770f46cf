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
