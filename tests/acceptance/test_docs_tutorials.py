"""The seed use-case tutorials, run as printed against a real `almanac serve --demo`.

Each tutorial page includes its files from docs/examples/; this runs those files, with the outside
world played by local servers: the exchange-rate service by an HTTP server the tenant allows, the
managers' mail server by an SMTP server (aiosmtpd), both on loopback (which the server is told to
allow with ALMANAC_ALLOW_PRIVATE_TARGETS, as an operator would for receivers on the same host).
"""

from __future__ import annotations

import email
import os
import subprocess
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from tests.integration.delivery.world import SmtpServer
from tests.support.docblocks import ROOT
from tests.support.httpservers import LocalServer
from tests.support.proc import ALMANAC, Server, free_port

EXAMPLES = ROOT / "docs" / "examples"
RATES = {"amount": 1.0, "base": "EUR", "date": "2026-11-27", "rates": {"CHF": 0.93, "GBP": 0.83, "USD": 1.05}}


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """A demo server allowed to reach loopback, a rates service and a mailbox beside it, an admin token.

    One for the module: each tutorial makes its own script, keys and target, as a reader would.
    """
    cwd = tmp_path_factory.mktemp("tutorials")
    smtp, rates = SmtpServer(), LocalServer()
    rates.routes["/latest"] = (200, RATES)
    env = {k: v for k, v in os.environ.items() if not k.startswith("ALMANAC_")}
    env.update(ALMANAC_PORT=str(free_port()), ALMANAC_LOG_LEVEL="warning", ALMANAC_VAR_DIR=str(cwd / "var"),
               ALMANAC_ALLOW_PRIVATE_TARGETS="1", ALMANAC_SMTP_PORT=str(smtp.port))
    server = Server(env, "--demo", cwd=cwd)
    try:
        server.wait_ready()
        made = subprocess.run([ALMANAC, "token", "create", "--tenant", "demo", "--name", "tutorials", "--role", "admin"],
                              env=env, cwd=cwd, capture_output=True, text=True, timeout=60, check=True)
        token = made.stdout.strip().splitlines()[-1]
        yield {"env": {**env, "TOKEN": token, "ALMANAC": server.base}, "api": server.client(token), "smtp": smtp,
               "rates": rates}
    finally:
        server.stop()
        smtp.close()
        rates.close()


def _run(script: str, env: dict[str, str], **extra: str) -> list[dict[str, Any]]:
    done = subprocess.run(["bash", str(EXAMPLES / script)], env={**env, **extra}, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr + done.stdout
    return [httpx.Response(200, content=line).json() for line in done.stdout.splitlines() if line.startswith("{")]


def _until(what: Callable[[], Any], timeout: float = 60) -> Any:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if found := what():
            return found
        time.sleep(0.2)
    raise AssertionError("not within the time")


def test_exchange_rates_are_fetched_and_kept(world: dict[str, Any]) -> None:
    url = world["rates"].url("/latest?from=EUR")
    egress, schedule, run, latest = _run("exchange-rates.sh", world["env"], RATES_URL=url)
    assert egress["hosts"] == [f"127.0.0.1:{world['rates'].port}"]
    assert "weekday" in schedule["description"] and schedule["next_run_at"]
    assert run["status"] == "succeeded", run
    assert run["output"] == {"base": "EUR", "date": "2026-11-27", "currencies": 3}
    assert latest["value"] == {"base": "EUR", "date": "2026-11-27", "rates": RATES["rates"]}
    assert world["api"].get("/api/v1/kv/rates:EUR:2026-11-27").json()["value"] == RATES["rates"]
    assert [seen["path"] for seen in world["rates"].seen] == ["/latest?from=EUR"]


def _cart_runs(api: httpx.Client) -> list[dict[str, Any]]:
    runs = api.get("/api/v1/runs", params={"limit": 50}).json()["items"]
    return [r for r in reversed(runs) if (r.get("job_key") or "").startswith("cart-c-1001") and r["status"] == "succeeded"]


def test_an_abandoned_cart_is_reminded_until_the_order_ships(world: dict[str, Any]) -> None:
    api = world["api"]
    (job,) = _run("cart-reminder.sh", world["env"], FIRST_CHECK_IN="1", RECHECK_SECONDS="2")
    assert job["key"] == "cart-c-1001-0"
    first = _until(lambda: _cart_runs(api))[0]
    assert first["output"]["reminded"] == 1  # the customer reminded, the next check planned
    _run("cart-shipped.sh", world["env"])
    stopped = _until(lambda: [r for r in _cart_runs(api) if r["output"].get("stopped") == "shipped"])
    assert stopped[0]["output"] == {"cart": "c-1001", "stopped": "shipped"}
    pending = api.get("/api/v1/jobs", params={"status": "pending"}).json()["items"]
    assert [j["key"] for j in pending if j["key"].startswith("cart-")] == []  # nothing more planned


def test_the_monthly_report_reaches_the_managers(world: dict[str, Any]) -> None:
    target, sales, schedule, run = _run("monthly-report.sh", world["env"])
    assert target["kind"] == "email" and sales["key"].startswith("sales:")
    assert "month" in schedule["description"] and schedule["next_run_at"]
    month = sales["key"].removeprefix("sales:")
    assert run["status"] == "succeeded" and run["output"] == {"month": month, "orders": 2, "total": 200}
    (mail,) = _until(lambda: world["smtp"].box.messages)
    message = email.message_from_bytes(mail.content)
    assert sorted(mail.rcpt_tos) == ["anna@example.com", "ben@example.com"]
    assert message["Subject"] == f"Sales in {month}: 200.00"
    assert message.get_payload(decode=True).decode().strip() == f"2 orders, 200.00 EUR in {month}."


def test_the_api_pages_habits_run_as_printed(world: dict[str, Any]) -> None:
    """docs/reference/api.md's sample: roles, the error body, job keys, batches, pages."""
    done = subprocess.run(["bash", str(EXAMPLES / "api-basics.sh")], env=world["env"], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr + done.stdout
    role, forbidden, missing, first, again, batch, *keys = done.stdout.splitlines()
    assert role == "admin"
    assert httpx.Response(403, content=forbidden).json()["error"]["code"] == "forbidden"
    assert httpx.Response(404, content=missing).json()["error"]["code"] == "not_found"
    assert (first, again) == ("201", "200")
    items = httpx.Response(200, content=batch).json()["items"]
    assert [(i["index"], i["key"]) for i in items] == [(0, "invoice-2026-001"), (1, "invoice-2026-002")]
    assert {"invoice-2026-001", "invoice-2026-002"} <= set(keys) and len(keys) == len(set(keys))


def test_a_script_calls_your_api_with_a_secret(world: dict[str, Any]) -> None:
    """docs/guide/outside-world.md's files: allow a host and store a secret, then a script uses both."""
    api, service = world["api"], LocalServer()
    service.routes["/v1/customers/7/notifications"] = (202, {"queued": True})
    try:
        allowed, stored = _run("allow-and-secret.sh", world["env"], API_HOST=f"127.0.0.1:{service.port}",
                               API_TOKEN_VALUE="sk_live_doc_example")
        assert allowed["hosts"] == ["api.frankfurter.app", f"127.0.0.1:{service.port}"] and stored["name"] == "API_TOKEN"
        made = api.post("/api/v1/scripts", json={"name": "notify", "source": (EXAMPLES / "notify-customer.js").read_text()})
        payload = {"api": service.url("").rstrip("/"), "customer": 7, "message": "your order shipped"}
        run = api.post(f"/api/v1/scripts/{made.json()['id']}/run", json={"payload": payload}).json()
        assert run["status"] == "succeeded" and run["output"] == {"status": 202}, run
        (seen,) = service.seen
        headers = {name.lower(): value for name, value in seen["headers"].items()}
        assert headers["authorization"] == "Bearer sk_live_doc_example"
        assert seen["body"] == '{"message":"your order shipped"}'
    finally:
        service.close()
