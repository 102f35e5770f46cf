"""The outbound address guard (SSRF): a tenant's webhook or `fetch` may not reach the platform's own network.

Two checks, both needed:

- `check_url()` when a target is created or changed: the URL's shape, and the
  addresses its host resolves to right now.
- `resolve_pinned()` before every delivery: resolve once, refuse if any
  answer is forbidden, and hand back the addresses the sender must connect
  to. The sender never resolves the name again, so a DNS answer that changes
  between check and connect (rebinding) cannot smuggle a private address in.

An address is forbidden unless it is globally routable unicast: loopback,
private ranges, link-local (cloud metadata 169.254.169.254 included), CGNAT
100.64/10, Azure's wire server 168.63.129.16, unique-local fc00::/7, local-use
NAT64 64:ff9b:1::/48, multicast, reserved, unspecified (0.0.0.0, ::), and IPv6
forms that carry an IPv4 address inside (mapped ::ffff:a.b.c.d, translated
::ffff:0:a.b.c.d, compatible ::a.b.c.d, NAT64 64:ff9b::/96, 6to4 2002::/16,
Teredo) are judged by that inner address. The operator may lift the guard with
`ALMANAC_ALLOW_PRIVATE_TARGETS=1` (tests with loopback receivers do).
"""

from __future__ import annotations

import errno
import ipaddress
import re
import socket
import ssl
from dataclasses import dataclass
from typing import Callable
from urllib.parse import urlsplit

from almanac.errors import ValidationError

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
Resolver = Callable[[str, int], list[str]]

URL_MAX = 2048
# Ranges refused even where a Python version's `is_global` would let them through.
_EXTRA_FORBIDDEN = [ipaddress.ip_network(n) for n in (
    "0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16", "172.16.0.0/12",
    "192.0.0.0/24", "192.0.2.0/24", "192.168.0.0/16", "198.18.0.0/15", "198.51.100.0/24",
    "203.0.113.0/24", "224.0.0.0/4", "240.0.0.0/4", "255.255.255.255/32",
    "::/128", "::1/128", "fc00::/7", "fe80::/10", "fec0::/10", "ff00::/8", "2001:db8::/32",
    "100::/64",
    # Azure's wire server and metadata endpoint: a public address every Azure VM reaches internally.
    "168.63.129.16/32",
    # Local-use NAT64 (RFC 8215): by definition a translator inside the operator's own network.
    "64:ff9b:1::/48",
)]
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_V4_TRANSLATED = ipaddress.ip_network("::ffff:0:0:0/96")  # SIIT's IPv4-translated form, ::ffff:0:a.b.c.d
_V4_COMPAT = ipaddress.ip_network("::/96")


class ForbiddenTarget(ValidationError):
    """The URL or its addresses are not allowed as an outbound target."""


@dataclass(frozen=True)
class Pinned:
    """Where one delivery connects: the name for Host/SNI, and the checked addresses."""

    host: str
    port: int
    addresses: tuple[str, ...]


def _inner_v4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address carries, if it is one of the embedding forms."""
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip.teredo is not None:
        return ip.teredo[1]  # the client's address
    if ip in _NAT64 or ip in _V4_TRANSLATED or (ip in _V4_COMPAT and int(ip) > 1):
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return None


def is_forbidden(address: str | IPAddress) -> bool:
    """True unless the address is globally routable unicast (judging embedded IPv4 by itself)."""
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0] if isinstance(address, str) else address)
    except ValueError:
        return True  # not an address at all: refuse rather than guess
    if isinstance(ip, ipaddress.IPv6Address):
        inner = _inner_v4(ip)
        if inner is not None and is_forbidden(inner):
            return True
    if any(ip in net for net in _EXTRA_FORBIDDEN if net.version == ip.version):
        return True
    return ip.is_multicast or not ip.is_global


def system_resolver(host: str, port: int) -> list[str]:
    """Every address the system resolver gives for host (both families), in its order."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    seen: list[str] = []
    for info in infos:
        addr = str(info[4][0])
        if addr not in seen:
            seen.append(addr)
    return seen


def split_url(url: str, what: str = "webhook URL") -> tuple[str, str, int]:
    """(scheme, host, port) of an http(s) URL without credentials; raises ForbiddenTarget otherwise."""
    if not isinstance(url, str) or len(url) > URL_MAX or any(c in url for c in "\r\n\t "):
        raise ForbiddenTarget(f"A {what} must be one line of at most {URL_MAX} characters.")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        raise ForbiddenTarget(f"The {what} cannot be read.") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ForbiddenTarget(f"A {what} must start with http:// or https:// and name a host.")
    if parts.username is not None or parts.password is not None:
        raise ForbiddenTarget(f"A {what} may not carry a user name or password; use a header with a secret instead.")
    return parts.scheme, parts.hostname, port or (443 if parts.scheme == "https" else 80)


def resolve_pinned(url: str, *, allow_private: bool, resolver: Resolver = system_resolver,
                   what: str = "webhook URL") -> Pinned:
    """Resolve the URL's host once and check every answer; the sender connects only to these."""
    _scheme, host, port = split_url(url, what)
    try:
        literal = ipaddress.ip_address(host)
        addresses = [str(literal)]
    except ValueError:
        try:
            addresses = resolver(host, port)
        except (OSError, UnicodeError) as exc:
            raise ForbiddenTarget(unresolved_words(exc, host)) from None
    if not addresses:
        raise ForbiddenTarget(f"The host {host!r} has no addresses.")
    if not allow_private:
        bad = [a for a in addresses if is_forbidden(a)]
        if bad:
            raise ForbiddenTarget(
                f"The host {host!r} resolves to a private, loopback or otherwise internal address "
                f"({bad[0]}); the operator has not allowed such targets.")
    return Pinned(host=host, port=port, addresses=tuple(addresses))


def check_url(url: str, *, allow_private: bool, resolver: Resolver = system_resolver) -> str:
    """The creation-time check: the same as at delivery, so a refused URL is never stored."""
    resolve_pinned(url, allow_private=allow_private, resolver=resolver)
    return url


# The resolver's and the socket's own texts ("[Errno -2] Name or service not known") name C
# library internals; a run's error and a delivery's last answer say what happened in a person's terms.
_NOT_FOUND = {getattr(socket, name) for name in ("EAI_NONAME", "EAI_NODATA", "EAI_ADDRFAMILY") if hasattr(socket, name)}
_ERRNO = re.compile(r"\[Errno (-?\d+)\]\s*")


def unresolved_words(exc: BaseException, host: str) -> str:
    """Why a host name gave no address, as a sentence: not found, no answer, or not a name at all."""
    code = exc.errno if isinstance(exc, OSError) else None
    if code in _NOT_FOUND:
        return f"The host name {host} could not be found; check its spelling."
    if code == getattr(socket, "EAI_AGAIN", None):
        return f"The name servers did not answer for {host} in time; a later attempt may work."
    if isinstance(exc, UnicodeError):
        return f"The host name {host} cannot be read."
    return f"The host name {host} cannot be resolved: {_ERRNO.sub('', str(exc)) or 'no answer'}."


def network_words(exc: BaseException, where: str) -> str:
    """Why a connection to `where` (host or host:port) failed, as a sentence without errno numbers."""
    if isinstance(exc, ssl.SSLCertVerificationError) or "CERTIFICATE_VERIFY_FAILED" in str(exc):
        why = getattr(exc, "verify_message", None) or str(exc).rsplit("certificate verify failed:", 1)[-1]
        return f"the certificate of {where} could not be verified ({why.strip(' ()')})"
    if isinstance(exc, ssl.SSLError):
        return f"the secure (TLS) connection to {where} failed"
    text = str(exc)
    match = _ERRNO.search(text)
    code = int(match.group(1)) if match else getattr(exc, "errno", None)
    plain = {
        errno.ECONNREFUSED: f"{where} refused the connection (nothing is listening there)",
        errno.ECONNRESET: f"{where} cut the connection off",
        errno.ENETUNREACH: f"{where} cannot be reached from this server's network",
        errno.EHOSTUNREACH: f"{where} cannot be reached from this server's network",
        errno.ETIMEDOUT: f"{where} did not answer the connection in time",
    }.get(code or 0)
    if plain:
        return plain
    if "disconnected" in text.lower() or "without sending" in text.lower():
        return f"{where} closed the connection without answering"
    return f"the connection to {where} failed: {_ERRNO.sub('', text) or type(exc).__name__}"
