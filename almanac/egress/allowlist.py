"""A tenant's egress allowlist (SPEC section 6): which hosts its scripts' `fetch` may reach.

Pure: parsing and matching only; the rows live in `egress.store`. An entry is a host name
(`api.example.com`), a wildcard for the names below a domain (`*.example.org`: `a.example.org`
and `a.b.example.org`, not `example.org` itself), or an IP literal, each with an optional port
(`host:8443`, `[2001:db8::1]:8443`). Without a port an entry allows the scheme's own port (80
for http, 443 for https); with one, that port only. Names compare case-insensitively, after
IDNA encoding, without a trailing dot. The allowlist is empty by default: nothing is reachable.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass

from almanac.errors import ValidationError

MAX_ENTRIES = 100
ENTRY_MAX = 260
_LABEL = re.compile(r"^(?!-)[a-z0-9-]{1,63}(?<!-)$")


@dataclass(frozen=True)
class Entry:
    host: str  # lower-case ASCII name or IP literal, without brackets; "*.x" for a wildcard
    port: int | None

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return host if self.port is None else f"{host}:{self.port}"


def normal_host(host: str) -> str:
    """A host name as compared: IDNA-encoded, lower case, no trailing dot (ValueError if not a name)."""
    host = host.strip().rstrip(".").lower()
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        pass
    ascii_host = host.encode("idna").decode("ascii") if not host.isascii() else host
    if not ascii_host or len(ascii_host) > 253 or not all(_LABEL.match(p) for p in ascii_host.split(".")):
        raise ValueError(host)
    return ascii_host


def parse_entry(text: object) -> Entry:
    """One allowlist entry; ValidationError naming it if it is not one."""
    if not isinstance(text, str) or not text.strip() or len(text) > ENTRY_MAX:
        raise ValidationError(f"An egress entry must be a host name of at most {ENTRY_MAX} characters.")
    raw = text.strip()
    host, port = raw, None
    if raw.startswith("["):  # [IPv6]:port
        inner, _, rest = raw[1:].partition("]")
        host, port = inner, (rest[1:] if rest.startswith(":") else None if not rest else "x")
    elif raw.count(":") == 1:
        host, port = raw.split(":")
    try:
        port_number = None if port is None else int(port)
        if port_number is not None and not 1 <= port_number <= 65535:
            raise ValueError(port)
        wildcard = host.startswith("*.")
        name = normal_host(host[2:] if wildcard else host)
        if wildcard and ":" in name or wildcard and name.replace(".", "").isdigit():
            raise ValueError(host)
    except (ValueError, UnicodeError):
        raise ValidationError(f"{raw!r} is not a host name, *.domain or IP address with an optional :port.") from None
    return Entry("*." + name if wildcard else name, port_number)


def parse(entries: object) -> list[Entry]:
    """A whole allowlist (a list of strings), without duplicates, in the given order."""
    if not isinstance(entries, list) or len(entries) > MAX_ENTRIES:
        raise ValidationError(f"The egress allowlist is a list of at most {MAX_ENTRIES} hosts.")
    seen: dict[Entry, None] = {}
    for text in entries:
        seen.setdefault(parse_entry(text), None)
    return list(seen)


def allows(entries: list[Entry], host: str, port: int, scheme: str) -> bool:
    """True if some entry lets a request reach `host:port` over `scheme`."""
    try:
        name = normal_host(host.strip("[]"))
    except (ValueError, UnicodeError):
        return False
    default = 443 if scheme == "https" else 80
    for entry in entries:
        if (entry.port if entry.port is not None else default) != port:
            continue
        if entry.host == name or entry.host.startswith("*.") and name.endswith(entry.host[1:]):
            return True
    return False
