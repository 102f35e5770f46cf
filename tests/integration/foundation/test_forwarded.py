"""Forwarded client addresses: believed only from the proxies the operator names (ALMANAC_TRUSTED_PROXIES).

The audit log's address and the sign-in throttle's per-address key both read the request's client,
so a forged `X-Forwarded-For` from anyone else must leave it as the connection's own peer.
"""

from __future__ import annotations

from typing import Any, Callable

import pytest
from fastapi.testclient import TestClient
from pydantic import ValidationError

from almanac.settings import Settings
from tests.support.apps import app_for


@pytest.fixture
def settings(settings: Settings) -> Settings:
    return settings.model_copy(update={"trusted_proxies": "10.0.0.0/8, 192.0.2.7"})


def _address_recorded(app: Any, token: str, peer: str, forwarded: str | None) -> str:
    client = TestClient(app, client=(peer, 40000))
    client.headers["Authorization"] = f"Bearer {token}"
    headers = {"X-Forwarded-For": forwarded} if forwarded is not None else {}
    assert client.put("/api/v1/kv/k", json={"value": 1}, headers=headers).status_code in (200, 201)
    return client.get("/api/v1/audit", params={"limit": 1}).json()["items"][0]["address"]


def test_a_named_proxy_names_the_client_and_no_one_else_can(
        services: Any, make_tenant: Callable[..., str], issue_token: Callable[..., str]) -> None:
    app = app_for(services)
    token = issue_token(make_tenant(), "admin")
    # The client is the right-most address that is not a trusted proxy: what the proxies themselves saw.
    assert _address_recorded(app, token, "10.1.2.3", "198.51.100.1, 203.0.113.9, 10.9.9.9") == "203.0.113.9"
    assert _address_recorded(app, token, "192.0.2.7", "203.0.113.10") == "203.0.113.10"
    assert _address_recorded(app, token, "10.1.2.3", None) == "10.1.2.3"
    # Anyone else, loopback included, is its own address whatever it claims.
    for peer in ("192.0.2.8", "127.0.0.1", "203.0.113.50"):
        assert _address_recorded(app, token, peer, "203.0.113.66") == peer


def test_the_setting_takes_addresses_and_ranges_and_refuses_anything_else() -> None:
    assert Settings(trusted_proxies="").trusted_proxy_list() == []
    assert Settings(trusted_proxies=" 10.1.2.3/8 ,::1, 192.0.2.7").trusted_proxy_list() == [
        "10.0.0.0/8", "::1/128", "192.0.2.7/32"]
    for bad in ("*", "proxy.internal", "10.0.0.0/33", "10.0.0.1 10.0.0.2"):
        with pytest.raises(ValidationError, match="TRUSTED_PROXIES"):
            Settings(trusted_proxies=bad)
