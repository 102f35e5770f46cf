"""One webhook attempt: resolve once and check (netguard), connect only to the checked address,
sign, POST, read at most a short excerpt of the answer, all within one deadline.

Pinning and the single deadline are `almanac.egress.transport`'s (shared with scripts' `fetch`).
"""

from __future__ import annotations

import json
import socket
import ssl
import time
from typing import Any

import httpcore

from almanac.delivery import signing
from almanac.egress import netguard
from almanac.egress.transport import PinnedBackend
from almanac.delivery.attempt import Job, Result

EXCERPT_MAX = 300
USER_AGENT = "Almanac-Webhooks/1"


def body_of(payload: dict[str, Any]) -> bytes:
    return json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode()


class WebhookSender:
    def __init__(self, *, timeout_s: float, allow_private: bool, resolver: netguard.Resolver) -> None:
        self.timeout_s, self.allow_private, self.resolver = timeout_s, allow_private, resolver
        self._ssl = ssl.create_default_context()

    def request_headers(self, job: Job, body: bytes) -> dict[str, str]:
        assert job.secret is not None
        stamp = int(time.time())  # the receiver compares it with its own wall clock
        return {
            "content-type": "application/json", "user-agent": USER_AGENT,
            "almanac-topic": job.payload["topic"], "almanac-delivery-attempt": str(job.attempt),
            **signing.headers(job.secret, job.payload["id"], stamp, body),
        }

    def send(self, job: Job) -> Result:
        started = time.monotonic()
        deadline = started + self.timeout_s
        try:
            pinned = netguard.resolve_pinned(job.url or "", allow_private=self.allow_private, resolver=self.resolver)
        except netguard.ForbiddenTarget as exc:
            return Result(ok=False, latency_ms=_ms(started), error=f"refused: {exc.message}")
        body = body_of(job.payload)
        try:
            return self._post(job, body, pinned, started, deadline)
        except (httpcore.TimeoutException, socket.timeout):
            return Result(ok=False, latency_ms=_ms(started), error=f"timed out after {self.timeout_s:g} s")
        except (httpcore.NetworkError, httpcore.ProtocolError, OSError, ssl.SSLError) as exc:
            return Result(ok=False, latency_ms=_ms(started), error=netguard.network_words(exc, pinned.host)[:EXCERPT_MAX])

    def _post(self, job: Job, body: bytes, pinned: netguard.Pinned, started: float, deadline: float) -> Result:
        timeouts = {name: self.timeout_s for name in ("connect", "read", "write", "pool")}
        with httpcore.ConnectionPool(ssl_context=self._ssl, network_backend=PinnedBackend(pinned, deadline),
                                     max_connections=1, retries=0) as pool:
            with pool.stream("POST", job.url or "", headers=self.request_headers(job, body), content=body,
                             extensions={"timeout": timeouts}) as response:
                excerpt = _excerpt(response)
                status = response.status
                retry_after = _header(response, b"retry-after")
        ok = 200 <= status < 300
        error = None if ok else (f"HTTP {status}" + (f": {excerpt}" if excerpt else ""))[:EXCERPT_MAX]
        return Result(ok=ok, latency_ms=_ms(started), status_code=status, error=error, retry_after=retry_after)


def _excerpt(response: httpcore.Response) -> str:
    """The start of the answer, for people reading the delivery log; the rest is not read."""
    got = b""
    for chunk in response.iter_stream():
        got += chunk
        if len(got) >= EXCERPT_MAX:
            break
    return " ".join(got[:EXCERPT_MAX].decode("utf-8", "replace").split())


def _header(response: httpcore.Response, name: bytes) -> str | None:
    for key, value in response.headers:
        if key.lower() == name:
            return value.decode("latin-1")[:100]
    return None


def _ms(started: float) -> int:
    return int((time.monotonic() - started) * 1000)
