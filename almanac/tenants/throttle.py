"""Slow down password guessing: too many failed sign-ins for one email, or from one address.

A pure, in-memory sliding window that takes `now`; each process keeps its own (with several
`almanac serve` processes the limit is per process: still a wall against one client hammering).
"""

from __future__ import annotations

import threading
from collections import deque
from datetime import datetime, timedelta

from almanac.errors import RateLimited

MAX_FAILURES = 10
# Many people may share one address (an office, a proxy): allow more failures per address than per email.
MAX_FAILURES_PER_ADDRESS = 100
WINDOW = timedelta(minutes=15)
# A bound on memory: an attacker cycling through random emails cannot grow this without limit.
MAX_KEYS = 50_000


class SignInThrottle:
    def __init__(self, max_failures: int = MAX_FAILURES, window: timedelta = WINDOW,
                 max_per_address: int = MAX_FAILURES_PER_ADDRESS) -> None:
        self.max_failures, self.window, self.max_per_address = max_failures, window, max_per_address
        self._failures: dict[str, deque[datetime]] = {}
        self._lock = threading.Lock()

    def check(self, keys: list[str], now: datetime) -> None:
        """Raise RateLimited if any key ("email:…" or "addr:…") has failed too often lately."""
        with self._lock:
            for key in keys:
                recent = self._recent(key, now)
                limit = self.max_per_address if key.startswith("addr:") else self.max_failures
                if len(recent) >= limit:
                    wait = int((recent[0] + self.window - now).total_seconds()) + 1
                    raise RateLimited(f"Too many failed sign-ins; try again in {wait // 60 + 1} minutes.",
                                      details={"retry_after_s": wait})

    def failed(self, keys: list[str], now: datetime) -> None:
        with self._lock:
            if len(self._failures) >= MAX_KEYS:
                self._failures.clear()  # crude, but memory stays bounded and the window restarts
            for key in keys:
                self._failures.setdefault(key, deque()).append(now)

    def succeeded(self, key: str) -> None:
        with self._lock:
            self._failures.pop(key, None)

    def _recent(self, key: str, now: datetime) -> deque[datetime]:
        recent = self._failures.get(key, deque())
        while recent and recent[0] <= now - self.window:
            recent.popleft()
        return recent
