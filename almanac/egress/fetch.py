"""Scripts' `fetch` (SPEC section 6), executed on the host: one `Fetcher` per run.

Every request, and every redirect it follows, is checked twice before a byte is sent: its host
and port must be on the tenant's allowlist (`allowlist.allows`), and the name is resolved once
and every address checked by the webhook guard (`netguard.resolve_pinned`); the connection then
goes to those addresses only (`transport.PinnedBackend`), with TLS verified against the system's
CA store. Limits: `MAX_REQUESTS` a run, `BODY_MAX` request and response bodies (a larger answer
is refused, never cut), `MAX_REDIRECTS`, and the run's own deadline for everything, connecting
included. No cookie is kept; an `Authorization` header is dropped when a redirect leaves the origin.
A URL goes out as a browser sends it (`wire_url`): the host name IDNA-encoded, non-ASCII in the
path and query percent-encoded as UTF-8; a header value outside ASCII is refused by name.

A refusal or a network failure raises `FetchError` (the script's promise rejects with its
message); every call, refused or not, adds one record (method, url, status, bytes, duration_ms,
error) to `records` and one count by outcome to the metrics; `Fetcher.call` records a call whose
arguments are refused too. A URL or message is passed through `redact` (the run's secrets) before
it is cut to length: a value cut short would no longer be found whole, and all but its last
characters would be stored.
"""

from __future__ import annotations

import re
import socket
import ssl
import time
from dataclasses import dataclass, field
from typing import Any, Callable
from urllib.parse import quote, urljoin, urlsplit, urlunsplit

import httpcore

from almanac.egress import allowlist, netguard
from almanac.egress.transport import PinnedBackend

MAX_REQUESTS = 20
BODY_MAX = 1024 * 1024
MAX_REDIRECTS = 5
HEADERS_MAX = 64  # request headers a script may set
HEADER_MAX = 8 * 1024
METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")
USER_AGENT = "Almanac-Fetch/1"
# Set by the transport, never by a script (as the web's forbidden header names).
_OURS = {"host", "content-length", "transfer-encoding", "connection", "keep-alive", "upgrade", "te",
         "trailer", "proxy-authorization", "accept-encoding", "cookie"}
OUTCOMES = ("ok", "http_error", "refused", "too_large", "timeout", "network_error")
_NON_ASCII = re.compile(r"[^\x00-\x7f]+")


class FetchError(Exception):
    """The request was refused or failed; the message is for the script's author."""

    def __init__(self, message: str, outcome: str) -> None:
        super().__init__(message)
        self.outcome = outcome


@dataclass(frozen=True)
class Request:
    url: str
    method: str = "GET"
    headers: tuple[tuple[str, str], ...] = ()
    body: bytes | None = None


def request_of(url: Any, method: Any, headers: Any, body: Any,
               redact: Callable[[str], str] = lambda text: text) -> Request:
    """The script's arguments, checked (types, sizes, names); FetchError("refused") if they cannot be sent
    (a header's name quoted in it is cut to length once `redact` replaced the run's secrets)."""
    if not isinstance(url, str) or not url:
        raise FetchError("fetch needs a URL string", "refused")
    method = "GET" if method is None else method
    if not isinstance(method, str) or method.upper() not in METHODS:
        raise FetchError(f"fetch: the method must be one of {', '.join(METHODS)}", "refused")
    pairs = list(headers.items()) if isinstance(headers, dict) else headers if headers is not None else []
    if not isinstance(pairs, list) or len(pairs) > HEADERS_MAX:
        raise FetchError(f"fetch: headers must be an object of at most {HEADERS_MAX} names", "refused")
    checked = []
    for pair in pairs:
        if not (isinstance(pair, (list, tuple)) and len(pair) == 2 and all(isinstance(p, str) for p in pair)):
            raise FetchError("fetch: every header name and value must be a string", "refused")
        name, value = pair[0].strip().lower(), pair[1]
        if not name or len(name) + len(value) > HEADER_MAX or any(c in name + value for c in "\r\n\0") \
                or not name.isascii() or any(c in name for c in " :\t"):
            raise FetchError(f"fetch: the header {redact(pair[0])[:100]!r} cannot be sent", "refused")
        if not value.isascii():  # as the web's fetch refuses what is not a byte string, but for UTF-8 too
            raise FetchError(f"fetch: the header {redact(pair[0])[:100]!r} has a value outside ASCII; encode it "
                             "first (encodeURIComponent, or base64)", "refused")
        if name not in _OURS:
            checked.append((name, value))
    if body is not None and not isinstance(body, str):
        raise FetchError("fetch: the body must be a string (JSON.stringify objects first)", "refused")
    data = None if body is None else body.encode("utf-8", "replace")
    if data is not None and len(data) > BODY_MAX:
        raise FetchError(f"fetch: the request body is {len(data)} bytes, over the {BODY_MAX}-byte limit", "refused")
    return Request(wire_url(url), method.upper(), tuple(checked), data)


def wire_url(url: str) -> str:
    """The URL as a browser sends it: an IDNA host, and non-ASCII in the path, query and fragment
    percent-encoded as UTF-8 (escapes already there are kept); FetchError("refused") for a host
    name with no IDNA form."""
    if url.isascii():
        return url
    try:
        parts = urlsplit(url)
    except ValueError:
        raise FetchError(f"fetch {url[:200]}: the URL cannot be read", "refused") from None
    netloc = parts.netloc
    if not netloc.isascii():
        userinfo, at, hostport = netloc.rpartition("@")
        host, colon, port = hostport.rpartition(":") if ":" in hostport else (hostport, "", "")
        try:
            host = allowlist.normal_host(host)
        except (ValueError, UnicodeError):
            raise FetchError(f"fetch {url[:200]}: the host name cannot be read", "refused") from None
        netloc = _escaped(userinfo) + at + host + colon + port
    return urlunsplit((parts.scheme, netloc, _escaped(parts.path), _escaped(parts.query), _escaped(parts.fragment)))


def _escaped(text: str) -> str:
    return _NON_ASCII.sub(lambda m: quote(m.group(), safe=""), text)


@dataclass
class Fetcher:
    """One run's `fetch`: its tenant's allowlist, its deadline (`time.monotonic()`), its count and records."""

    entries: list[allowlist.Entry]
    deadline: float
    allow_private: bool = False
    resolver: netguard.Resolver = netguard.system_resolver
    ssl_context: ssl.SSLContext | None = None
    observe: Callable[[str], None] = lambda outcome: None
    redact: Callable[[str], str] = lambda text: text
    records: list[dict[str, Any]] = field(default_factory=list)

    def fetch(self, request: Request) -> dict[str, Any]:
        """{status, statusText, url, headers: [[name, value]...], body} of the final answer, or FetchError."""
        started = time.monotonic()
        record: dict[str, Any] = {"method": request.method, "url": self._cut(request.url, netguard.URL_MAX),
                                  "status": None, "bytes": 0, "duration_ms": 0}
        if len(self.records) >= MAX_REQUESTS:
            refused = FetchError(f"fetch: a run may make at most {MAX_REQUESTS} requests", "refused")
            self._note(record, started, refused)
            raise refused
        self.records.append(record)
        try:
            answer = self._follow(request, record)
        except FetchError as exc:
            self._note(record, started, exc)
            if exc.outcome == "timeout":  # socket timeouts may fire a hair early: end only once the run's time is up
                time.sleep(max(0.0, self.deadline - time.monotonic()) + 0.001)
            raise
        record["duration_ms"] = _ms(started)
        self.observe("ok" if answer["status"] < 400 else "http_error")
        return answer

    def call(self, url: Any, method: Any, headers: Any, body: Any) -> dict[str, Any]:
        """The script's own arguments: checked (`request_of`) and sent; a refusal is recorded like any call."""
        try:
            request = request_of(url, method, headers, body, self.redact)
        except FetchError as exc:
            if len(self.records) < MAX_REQUESTS:
                shown = self._cut(url, netguard.URL_MAX) if isinstance(url, str) else ""
                record = {"method": str(method or "GET").upper()[:16], "url": shown, "status": None, "bytes": 0,
                          "duration_ms": 0}
                self.records.append(record)
                self._note(record, time.monotonic(), exc)
            raise
        return self.fetch(request)

    def _note(self, record: dict[str, Any], started: float, exc: FetchError) -> None:
        record["error"], record["duration_ms"] = self._cut(str(exc), 500), _ms(started)
        self.observe(exc.outcome)

    def _follow(self, request: Request, record: dict[str, Any]) -> dict[str, Any]:
        for _hop in range(MAX_REDIRECTS + 1):
            status, reason, headers, body = self._one(request)
            record.update(url=self._cut(request.url, netguard.URL_MAX), status=status, bytes=len(body))
            location = _header(headers, "location")
            if status not in (301, 302, 303, 307, 308) or location is None:
                return {"status": status, "statusText": reason, "url": request.url,
                        "headers": [[k, v] for k, v in headers], "body": body.decode("utf-8", "replace")}
            request = _redirected(request, status, location)
        raise FetchError(f"fetch {record['url']}: more than {MAX_REDIRECTS} redirects", "refused")

    def _one(self, request: Request) -> tuple[int, str, list[tuple[str, str]], bytes]:
        scheme, host, port = self._checked(request.url)
        pinned = self._pinned(request.url)
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise FetchError(f"fetch {request.url}: the run's time is up", "timeout")
        headers = [("host", _host_header(scheme, host, port)), ("user-agent", USER_AGENT),
                   ("accept-encoding", "identity"), *request.headers]
        try:
            with httpcore.ConnectionPool(ssl_context=self.ssl_context or _default_ssl(),
                                         network_backend=PinnedBackend(pinned, self.deadline),
                                         max_connections=1, retries=0) as pool:
                with pool.stream(request.method, request.url, headers=headers, content=request.body or b"",
                                 extensions={"timeout": dict.fromkeys(("connect", "read", "write", "pool"), left)}
                                 ) as response:
                    body = _read_capped(response, request.url)
                    reason = response.extensions.get("reason_phrase", b"").decode("latin-1", "replace")
                    got = [(k.decode("latin-1").lower(), v.decode("latin-1")) for k, v in response.headers]
                    return response.status, reason, got, body
        except (httpcore.TimeoutException, socket.timeout):
            raise FetchError(f"fetch {request.url}: no answer before the run's deadline", "timeout") from None
        except (httpcore.NetworkError, httpcore.ProtocolError, httpcore.UnsupportedProtocol, OSError,
                ssl.SSLError) as exc:
            where = host if port == (443 if scheme == "https" else 80) else f"{host}:{port}"
            raise FetchError(self._cut(f"fetch {request.url}: {netguard.network_words(exc, where)}", 500),
                             "network_error") from None

    def _checked(self, url: str) -> tuple[str, str, int]:
        try:
            scheme, host, port = netguard.split_url(url, "fetch URL")
        except netguard.ForbiddenTarget as exc:
            raise FetchError(f"fetch {self._cut(url, 200)}: {exc.message}", "refused") from None
        if not allowlist.allows(self.entries, host, port, scheme):
            shown = host if port == (443 if scheme == "https" else 80) else f"{host}:{port}"
            raise FetchError(f"fetch: the host {shown} is not on the tenant's egress allowlist", "refused")
        return scheme, host, port

    def _pinned(self, url: str) -> netguard.Pinned:
        try:
            return netguard.resolve_pinned(url, allow_private=self.allow_private, resolver=self.resolver,
                                           what="fetch URL")
        except netguard.ForbiddenTarget as exc:
            raise FetchError(f"fetch {self._cut(url, 200)}: {exc.message}", "refused") from None

    def _cut(self, text: str, most: int) -> str:
        """At most `most` characters of `text`, its secrets replaced first."""
        return self.redact(text)[:most]


def _read_capped(response: httpcore.Response, url: str) -> bytes:
    chunks, size = [], 0
    for chunk in response.iter_stream():
        size += len(chunk)
        if size > BODY_MAX:
            raise FetchError(f"fetch {url}: the response body is over the {BODY_MAX}-byte limit", "too_large")
        chunks.append(chunk)
    return b"".join(chunks)


def _host_header(scheme: str, host: str, port: int) -> str:
    """`Host` as RFC 9110 writes it: an IPv6 literal in brackets, the port only when not the scheme's."""
    shown = f"[{host}]" if ":" in host else host
    return shown if port == (443 if scheme == "https" else 80) else f"{shown}:{port}"


def _redirected(request: Request, status: int, location: str) -> Request:
    try:  # headers arrive as latin-1 text; a Location in UTF-8 (as browsers read it) is taken back to it
        location = location.encode("latin-1").decode("utf-8")
    except UnicodeError:
        pass
    url = wire_url(urljoin(request.url, location))
    same_origin = urlsplit(url)[:2] == urlsplit(request.url)[:2]
    headers = tuple((k, v) for k, v in request.headers if same_origin or k != "authorization")
    if status == 303 or status in (301, 302) and request.method == "POST":
        return Request(url, "GET" if request.method != "HEAD" else "HEAD",
                       tuple((k, v) for k, v in headers if k != "content-type"), None)
    return Request(url, request.method, headers, request.body)


def _header(headers: list[tuple[str, str]], name: str) -> str | None:
    return next((v for k, v in headers if k == name), None)


_SSL: list[ssl.SSLContext] = []


def _default_ssl() -> ssl.SSLContext:
    """The system's CA store, verified host names (built once: loading the store costs milliseconds)."""
    if not _SSL:
        _SSL.append(ssl.create_default_context())
    return _SSL[0]


def _ms(started: float) -> int:
    return int((time.monotonic() - started) * 1000)
