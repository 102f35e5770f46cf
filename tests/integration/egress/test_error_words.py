"""What a run's error says when `fetch` cannot reach a host: the person's terms (the host name
could not be found, the server refused the connection), never the resolver's errno text
(SQLite and PostgreSQL; the real system resolver, a real closed port)."""

from __future__ import annotations

import pytest

from tests.support.proc import free_port

FETCH = """export default async function (event) {
  await fetch(event.payload.url);
  return "reached";
}
"""


@pytest.fixture
def settings(settings):
    return settings.model_copy(update={"allow_private_targets": True, "sandbox_processes": 1})


def _failed_fetch(api, host: str, url: str) -> dict:
    client = api()
    assert client.put("/api/v1/egress", json={"hosts": [host]}).status_code == 200
    script = client.post("/api/v1/scripts", json={"name": "f", "source": FETCH, "timeout_ms": 5000}).json()["id"]
    run = client.post(f"/api/v1/scripts/{script}/run", json={"payload": {"url": url}}).json()
    assert run["status"] == "failed", run
    return run


def test_a_host_name_that_does_not_exist_is_said_so(api):
    run = _failed_fetch(api, "no-such-host.invalid", "https://no-such-host.invalid/rates")
    assert "host name no-such-host.invalid could not be found" in run["error"], run["error"]
    assert "Errno" not in run["error"] and "Name or service" not in run["error"]
    assert "could not be found" in run["http"][0]["error"]


def test_a_closed_port_is_a_refused_connection_in_plain_words(api):
    port = free_port()
    run = _failed_fetch(api, f"127.0.0.1:{port}", f"http://127.0.0.1:{port}/")
    assert f"127.0.0.1:{port} refused the connection" in run["error"], run["error"]
    assert "Errno" not in run["error"] and "ConnectError" not in run["error"]
