"""Delivery settings and the retry decisions: pure functions of (attempt, now, randomness).

Backoff is exponential with "equal jitter": the n-th failure waits between half and all of
min(cap, base * 2**(n-1)), so receivers that recover are not hit by every dispatcher at once.
A `Retry-After` answer (seconds or an HTTP date) is honoured when it asks for longer, up to
`retry_after_cap_s`, so a receiver cannot park a delivery for days.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, fields
from datetime import datetime, timedelta
from email.utils import parsedate_to_datetime
from typing import Any


@dataclass(frozen=True)
class DeliveryConfig:
    timeout_s: float = 10.0  # whole attempt: connect, send, answer
    max_attempts: int = 8  # then the delivery is dead (about 4 hours with the defaults)
    backoff_base_s: float = 30.0
    backoff_cap_s: float = 3 * 3600.0
    retry_after_cap_s: float = 3600.0
    batch: int = 20  # deliveries claimed per tenant per pass
    threads: int = 4  # sends in flight per pass
    poll_s: float = 1.0  # the loop's idle wait; wake() cuts it short
    fanout_batch: int = 200

    @property
    def lease_s(self) -> float:
        """Long enough for a whole attempt and its recording; a lapsed lease means the sender died."""
        return self.timeout_s * 3 + 30

    @classmethod
    def from_settings(cls, settings: Any) -> "DeliveryConfig":
        """`delivery_<field>` settings when the operator has them (ALMANAC_DELIVERY_TIMEOUT_S...)."""
        given = {f.name: getattr(settings, f"delivery_{f.name}") for f in fields(cls)
                 if getattr(settings, f"delivery_{f.name}", None) is not None}
        return cls(**given)


def backoff_s(failures: int, cfg: DeliveryConfig, rng: random.Random) -> float:
    """Seconds to wait after the `failures`-th failed attempt (1-based)."""
    ceiling = min(cfg.backoff_cap_s, cfg.backoff_base_s * 2 ** min(failures - 1, 30))
    return ceiling / 2 + rng.uniform(0, ceiling / 2)


def parse_retry_after(value: str | None, now: datetime) -> float | None:
    """Seconds asked for by a Retry-After header, or None if absent or unreadable."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when is None or when.tzinfo is None:
        return None
    return max(0.0, (when - now).total_seconds())


def next_attempt(failures: int, now: datetime, cfg: DeliveryConfig, rng: random.Random,
                 retry_after_s: float | None = None) -> datetime | None:
    """When to try again after a failure, or None when the delivery is dead."""
    if failures >= cfg.max_attempts:
        return None
    wait = backoff_s(failures, cfg, rng)
    if retry_after_s is not None:
        wait = max(wait, min(retry_after_s, cfg.retry_after_cap_s))
    return now + timedelta(seconds=wait)
