"""IANA zones by name, validated once and cached (load() is on the hot path)."""

from __future__ import annotations

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
