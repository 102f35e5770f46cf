"""The SSRF guard: what it refuses, what it lets through, and that resolution is pinned."""

from __future__ import annotations

import pytest

from almanac.egress.netguard import ForbiddenTarget, check_url, is_forbidden, resolve_pinned, split_url

FORBIDDEN = [
    "127.0.0.1", "127.255.0.1", "0.0.0.0", "0.1.2.3", "10.0.0.1", "172.16.5.4", "172.31.255.255",
    "192.168.1.1", "169.254.169.254", "169.254.0.1", "100.64.0.1", "100.127.255.254", "224.0.0.1",
    "239.1.2.3", "255.255.255.255", "198.18.0.1", "192.0.2.1", "240.0.0.1",
    "::", "::1", "fc00::1", "fd12:3456::1", "fe80::1", "fe80::1%eth0", "ff02::1", "2001:db8::1",
    "::ffff:127.0.0.1", "::ffff:10.0.0.1", "::ffff:169.254.169.254", "::127.0.0.1",
    "64:ff9b::a9fe:a9fe", "2002:7f00:1::1", "2002:a00:1::1",
    "not-an-ip",
]
ALLOWED = ["93.184.216.34", "8.8.8.8", "1.1.1.1", "2606:4700:4700::1111", "::ffff:8.8.8.8", "2002:808:808::1"]


@pytest.mark.parametrize("address", FORBIDDEN)
def test_internal_addresses_are_forbidden(address: str) -> None:
    assert is_forbidden(address)


@pytest.mark.parametrize("address", ALLOWED)
def test_public_addresses_are_allowed(address: str) -> None:
    assert not is_forbidden(address)


@pytest.mark.parametrize("url", [
    "http://127.0.0.1:8000/hook", "http://[::1]/x", "http://[::ffff:127.0.0.1]/x", "http://169.254.169.254/latest/",
    "https://10.1.2.3/", "http://0.0.0.0:80/", "http://[fd00::5]:9000/",
])
def test_literal_internal_urls_are_refused(url: str) -> None:
    with pytest.raises(ForbiddenTarget):
        check_url(url, allow_private=False)


@pytest.mark.parametrize("url", [
    "ftp://example.com/", "file:///etc/passwd", "http://", "http://user:pw@example.com/", "javascript:alert(1)",
    "http://exa mple.com/", "http://example.com:99999/", "http://example.com/\r\nX: y",
])
def test_malformed_urls_are_refused(url: str) -> None:
    with pytest.raises(ForbiddenTarget):
        split_url(url)


def test_a_name_is_judged_by_every_address_it_resolves_to() -> None:
    def resolver(host: str, port: int) -> list[str]:
        return {"good.test": ["93.184.216.34"], "mixed.test": ["93.184.216.34", "10.0.0.7"],
                "meta.test": ["169.254.169.254"]}[host]

    pinned = resolve_pinned("https://good.test/hook", allow_private=False, resolver=resolver)
    assert (pinned.host, pinned.port, pinned.addresses) == ("good.test", 443, ("93.184.216.34",))
    for name in ("mixed.test", "meta.test"):
        with pytest.raises(ForbiddenTarget):
            resolve_pinned(f"http://{name}/", allow_private=False, resolver=resolver)


def test_localhost_by_name_is_refused_unless_allowed() -> None:
    with pytest.raises(ForbiddenTarget):
        check_url("http://localhost:9/", allow_private=False)
    pinned = resolve_pinned("http://localhost:9/", allow_private=True)
    assert pinned.addresses and all(is_forbidden(a) for a in pinned.addresses)


def test_unresolvable_names_are_refused() -> None:
    def resolver(host: str, port: int) -> list[str]:
        raise OSError("no such host")

    with pytest.raises(ForbiddenTarget, match="cannot be resolved"):
        check_url("http://nowhere.invalid/", allow_private=True, resolver=resolver)


def test_the_operator_switch_allows_private_targets() -> None:
    assert check_url("http://127.0.0.1:8080/x", allow_private=True)
    assert resolve_pinned("http://[::1]:81/", allow_private=True).addresses == ("::1",)


# IPv6 forms that carry an internal IPv4 address, and cloud addresses outside the private ranges.
EMBEDDED_OR_CLOUD = [
    "::ffff:0:10.0.0.1", "::ffff:0:127.0.0.1", "::ffff:0:169.254.169.254",  # IPv4-translated (SIIT)
    "64:ff9b:1::a00:1", "64:ff9b:1::808:808", "64:ff9b:1:ffff::1",  # local-use NAT64: inside the operator's network
    "64:ff9b::10.0.0.1", "64:ff9b::127.0.0.1", "64:ff9b::168.63.129.16",  # well-known NAT64
    "2002:a00:1::", "2002:c0a8:101::1", "2002:a83f:8110::",  # 6to4 around 10/8, 192.168/16 and Azure's
    "168.63.129.16", "::ffff:168.63.129.16",  # Azure's wire server and metadata
]


@pytest.mark.parametrize("address", EMBEDDED_OR_CLOUD)
def test_embedded_internal_and_cloud_addresses_are_forbidden(address: str) -> None:
    assert is_forbidden(address)
    with pytest.raises(ForbiddenTarget):
        check_url(f"http://[{address}]/" if ":" in address else f"http://{address}/", allow_private=False)
    check_url(f"http://[{address}]/" if ":" in address else f"http://{address}/", allow_private=True)


@pytest.mark.parametrize("address", ["::ffff:0:8.8.8.8", "64:ff9b::808:808", "2002:808:808::1"])
def test_embedded_public_addresses_stay_allowed(address: str) -> None:
    assert not is_forbidden(address)
