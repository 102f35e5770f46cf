"""The one outbound HTTP transport (webhook delivery and scripts' `fetch`): pinned, with one deadline.

Pinning: httpcore asks its network backend to connect to (host, port) of the URL; our backend
ignores DNS and connects to the addresses netguard checked. The URL keeps its host name, so
the Host header, TLS SNI and certificate verification all use the name, as the receiver
expects. httpcore follows no redirects and reads no proxy settings from the environment.

Deadline: httpcore's timeouts are per read or write, so a server trickling a byte at a time
could hold a thread for ever; the backend's streams shrink every timeout to what is left of
the request's single deadline.
"""

from __future__ import annotations

import ssl
import time
from typing import Any

import httpcore

from almanac.egress import netguard


class DeadlineStream(httpcore.NetworkStream):
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
        return DeadlineStream(tls, self._deadline)

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class PinnedBackend(httpcore.NetworkBackend):
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
                return DeadlineStream(stream, self._deadline)
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                last = exc
        raise last

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)
