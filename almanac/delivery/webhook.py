"""One webhook attempt: resolve once and check (netguard), connect only to the checked address,
sign, POST, read at most a short excerpt of the answer, all within one deadline.

Pinning: httpcore asks its network backend to connect to (host, port) of the URL; our backend
ignores DNS and connects to the addresses netguard checked. The URL keeps its host name, so
the Host header, TLS SNI and certificate verification all use the name, as the receiver
expects. httpcore follows no redirects and reads no proxy settings from the environment.

Deadline: httpcore's timeouts are per read or write, so a receiver trickling a byte at a time
could hold a thread for ever; the backend's streams shrink every timeout to what is left of
the attempt's single deadline.
"""

from __future__ import annotations

import json
import socket
import ssl
import time
from typing import Any

import httpcore

from almanac.delivery import netguard, signing
from almanac.delivery.sending import Job, Result

EXCERPT_MAX = 300
USER_AGENT = "Almanac-Webhooks/1"


class _DeadlineStream(httpcore.NetworkStream):
    def __init__(self, inner: httpcore.NetworkStream, deadline: float) -> None:
        self._inner, self._deadline = inner, deadline

    def _left(self, timeout: float | None, error: type[Exception]) -> float:
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise error("the attempt's deadline passed")
        return left if timeout is None else min(timeout, left)

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._inner.read(max_bytes, self._left(timeout, httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._inner.write(buffer, self._left(timeout, httpcore.WriteTimeout))

    def close(self) -> None:
        self._inner.close()

    def start_tls(self, ssl_context: ssl.SSLContext, server_hostname: str | None = None,
                  timeout: float | None = None) -> httpcore.NetworkStream:
        tls = self._inner.start_tls(ssl_context, server_hostname, self._left(timeout, httpcore.ConnectTimeout))
        return _DeadlineStream(tls, self._deadline)

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class _PinnedBackend(httpcore.NetworkBackend):
    """Connects to the checked addresses in order, never to what the name resolves to now."""

    def __init__(self, pinned: netguard.Pinned, deadline: float) -> None:
        self._pinned, self._deadline = pinned, deadline
        self._sync = httpcore.SyncBackend()

    def connect_tcp(self, host: str, port: int, timeout: float | None = None, local_address: str | None = None,
                    socket_options: Any = None) -> httpcore.NetworkStream:
        if host.strip("[]").lower() != self._pinned.host.lower() or port != self._pinned.port:
            raise httpcore.ConnectError("refusing a connection to an address that was not checked")
        last: Exception = httpcore.ConnectError("no address")
        for address in self._pinned.addresses:
            left = self._deadline - time.monotonic()
            if left <= 0:
                raise httpcore.ConnectTimeout("the attempt's deadline passed")
            try:
                stream = self._sync.connect_tcp(address, port, timeout=min(left, timeout or left))
                return _DeadlineStream(stream, self._deadline)
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                last = exc
        raise last

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


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
            return Result(ok=False, latency_ms=_ms(started), error=f"{type(exc).__name__}: {exc}"[:EXCERPT_MAX])

    def _post(self, job: Job, body: bytes, pinned: netguard.Pinned, started: float, deadline: float) -> Result:
        timeouts = {name: self.timeout_s for name in ("connect", "read", "write", "pool")}
        with httpcore.ConnectionPool(ssl_context=self._ssl, network_backend=_PinnedBackend(pinned, deadline),
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
