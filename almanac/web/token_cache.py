"""API tokens verified a moment ago are not looked up again (the token lookup was a
transaction of its own on every request, 4 of a PUT's ~20 round trips to the database).

An entry keeps the principal and the stored SHA-256 of the token's secret for `ttl_s` seconds
(`ALMANAC_TOKEN_CACHE_S`, 2 s by default; 0 turns the cache off). A presented token is still checked
against that hash on every request, so a wrong secret with a cached public id is refused. Revoking a
token in this process forgets it at once (before and again after the revoking transaction commits);
a token revoked by another process stops working here within `ttl_s`. Missing the cache looks the
token up as before, which is also when `last_used_at` is written (at most once a minute, after the answer).
"""

from __future__ import annotations

import hmac
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from almanac.tenants import tokens
from almanac.tenants.auth import Principal

MAX_ENTRIES = 10_000  # past it the cache starts over: a bound on memory, not a policy


@dataclass(frozen=True)
class _Entry:
    secret_hash: str
    principal: Principal
    expires: float


class TokenCache:
    def __init__(self, ttl_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.ttl_s = ttl_s
        self.clock = clock
        self._entries: dict[str, _Entry] = {}
        self._lock = threading.Lock()

    def get(self, plaintext: str) -> Principal | None:
        """The cached principal of this exact token, or None (not cached, expired, or another secret)."""
        if self.ttl_s <= 0:
            return None
        parts = tokens.split(plaintext.strip())
        if parts is None:
            return None
        entry = self._entries.get(parts[0])
        if entry is None or entry.expires <= self.clock():
            return None
        if not hmac.compare_digest(tokens.hash_secret(parts[1]), entry.secret_hash):
            return None
        return entry.principal

    def put(self, plaintext: str, principal: Principal) -> None:
        """Remember a token the database has just verified."""
        if self.ttl_s <= 0:
            return
        parts = tokens.split(plaintext.strip())
        if parts is None:
            return
        entry = _Entry(tokens.hash_secret(parts[1]), principal, self.clock() + self.ttl_s)
        with self._lock:
            if len(self._entries) >= MAX_ENTRIES:
                self._entries.clear()
            self._entries[parts[0]] = entry

    def forget(self, public_id: str) -> None:
        with self._lock:
            self._entries.pop(public_id, None)
