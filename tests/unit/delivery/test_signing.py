"""Webhook signatures: Standard Webhooks scheme, replay window, key rotation lists."""

from __future__ import annotations

import base64
import hashlib
import hmac

from hypothesis import given, strategies as st

from almanac.delivery import signing

SECRET = "whsec_" + base64.b64encode(b"k" * 32).decode()


def test_known_vector() -> None:
    body = b'{"a":1}'
    expected = base64.b64encode(hmac.new(b"k" * 32, b'evt_1.1700000000.{"a":1}', hashlib.sha256).digest()).decode()
    assert signing.signature(SECRET, "evt_1", 1700000000, body) == "v1," + expected


def test_new_secrets_are_distinct_and_well_formed() -> None:
    a, b = signing.new_secret(), signing.new_secret()
    assert a != b and a.startswith("whsec_") and len(base64.b64decode(a[6:])) == 32


@given(body=st.binary(max_size=512), stamp=st.integers(min_value=0, max_value=2**33))
def test_sign_then_verify(body: bytes, stamp: int) -> None:
    headers = signing.headers(SECRET, "evt_x", stamp, body)
    assert signing.verify(SECRET, headers, body, now=stamp)
    assert not signing.verify(SECRET, headers, body + b"!", now=stamp)
    assert not signing.verify(signing.new_secret(), headers, body, now=stamp)


def test_old_or_future_timestamps_fail() -> None:
    headers = signing.headers(SECRET, "evt_1", 1_000_000, b"{}")
    assert signing.verify(SECRET, headers, b"{}", now=1_000_000 + 300)
    assert not signing.verify(SECRET, headers, b"{}", now=1_000_000 + 301)
    assert not signing.verify(SECRET, headers, b"{}", now=1_000_000 - 301)


def test_one_matching_signature_in_a_list_is_enough() -> None:
    headers = signing.headers(SECRET, "evt_1", 5, b"{}")
    headers["webhook-signature"] = "v1,bm90LWl0 " + headers["webhook-signature"]
    assert signing.verify(SECRET, headers, b"{}", now=5)
    assert not signing.verify(SECRET, {"webhook-id": "evt_1"}, b"{}", now=5)
