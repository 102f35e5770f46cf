"""fetch, egress and secrets end to end: the API sets them, a run uses them, the run records them
(SQLite and PostgreSQL); secret values are encrypted at rest and redacted from what runs leave."""

from __future__ import annotations

import pytest
from sqlalchemy import text

from almanac.db import schema_for
from tests.support.httpservers import LocalServer


@pytest.fixture
def settings(settings):
    # Loopback receivers: the operator's switch (the guard itself is tested in test_fetch_servers).
    return settings.model_copy(update={"allow_private_targets": True, "sandbox_processes": 1})


@pytest.fixture(scope="module")
def server():
    s = LocalServer()
    yield s
    s.close()


def make_script(client, source: str, timeout_ms: int = 3000) -> int:
    answer = client.post("/api/v1/scripts", json={"name": "s", "source": source, "timeout_ms": timeout_ms})
    assert answer.status_code == 201, answer.text
    return answer.json()["id"]


def run(client, script_id: int, payload=None) -> dict:
    answer = client.post(f"/api/v1/scripts/{script_id}/run", json={"payload": payload or {}})
    assert answer.status_code == 200, answer.text
    return answer.json()


def test_the_allowlist_is_empty_by_default_and_replaced_whole(api):
    admin = api()
    assert admin.get("/api/v1/egress").json() == {"hosts": []}
    put = admin.put("/api/v1/egress", json={"hosts": ["API.example.com", "*.example.org", "host:8443", "Bücher.de"]})
    assert put.status_code == 200
    assert put.json()["hosts"] == ["api.example.com", "*.example.org", "host:8443", "xn--bcher-kva.de"]
    for bad in (["exa mple.com"], ["*.*.x"], ["h:99999"], "api.example.com", [1], ["x" * 300]):
        refused = admin.put("/api/v1/egress", json={"hosts": bad})
        assert refused.status_code == 422 and refused.json()["error"]["code"] == "validation_error", bad
    assert admin.get("/api/v1/egress").json()["hosts"][0] == "api.example.com"  # nothing changed
    assert api("editor", tenant=admin.tenant).put("/api/v1/egress", json={"hosts": []}).status_code == 403
    assert api("viewer", tenant=admin.tenant).get("/api/v1/egress").status_code == 403


def test_secrets_are_write_only_and_encrypted_at_rest(api, database):
    admin = api()
    assert admin.put("/api/v1/secrets/API_TOKEN", json={"value": "tok-123456"}).status_code == 201
    assert admin.put("/api/v1/secrets/API_TOKEN", json={"value": "tok-abcdef"}).status_code == 200
    listed = admin.get("/api/v1/secrets").json()["items"]
    assert [item["name"] for item in listed] == ["API_TOKEN"] and "tok-abcdef" not in str(listed)
    with database.tenant_connection(admin.tenant) as conn:
        (stored,) = conn.execute(text(f'SELECT value FROM "{schema_for(admin.tenant)}".secrets')).scalars()
    assert stored.startswith("fernet:") and "tok-abcdef" not in stored
    for name, body in [("lower", {"value": "x"}), ("A" * 65, {"value": "x"}), ("OK", {"value": ""}),
                       ("OK", {"value": "x" * 8193}), ("OK", {"value": 5}), ("OK", {})]:
        refused = admin.put(f"/api/v1/secrets/{name}", json=body)
        assert refused.status_code == 422 and refused.json()["error"]["code"] == "validation_error", (name, body)
    assert admin.delete("/api/v1/secrets/API_TOKEN").status_code == 204
    assert admin.delete("/api/v1/secrets/API_TOKEN").status_code == 404
    assert api("editor", tenant=admin.tenant).put("/api/v1/secrets/X", json={"value": "v"}).status_code == 403


def test_a_run_fetches_an_allowed_host_with_a_bearer_secret_and_records_it(api, server):
    admin = api()
    admin.put("/api/v1/egress", json={"hosts": [f"127.0.0.1:{server.port}"]})
    admin.put("/api/v1/secrets/API_TOKEN", json={"value": "s3cr3t-value"})
    script = make_script(admin, f"""export default async () => {{
      const token = await almanac.secrets.get('API_TOKEN');
      const res = await fetch('{server.url('/echo')}?key=' + token, {{
        method: 'POST', headers: {{Authorization: `Bearer ${{token}}`}}, body: JSON.stringify({{hi: 1}})}});
      const seen = await res.json();
      console.log('sent', token);
      return {{status: res.status, auth: seen.headers.Authorization ?? seen.headers.authorization, token}};
    }}""")
    done = run(admin, script)
    assert done["status"] == "succeeded", done
    assert server.seen[-1]["headers"].get("authorization", server.seen[-1]["headers"].get("Authorization")) \
        == "Bearer s3cr3t-value"  # the server got the real value...
    assert done["output"] == {"status": 200, "auth": "Bearer [secret API_TOKEN]", "token": "[secret API_TOKEN]"}
    assert done["logs"] == ["sent [secret API_TOKEN]"]  # ...the run's record never holds it
    (record,) = done["http"]
    assert record["method"] == "POST" and record["status"] == 200 and record["bytes"] > 0
    assert record["url"] == server.url("/echo") + "?key=[secret API_TOKEN]"
    again = admin.get(f"/api/v1/runs/{done['id']}").json()
    assert again["http"] == done["http"] and "s3cr3t-value" not in str(again)


def test_an_error_holding_a_secret_is_redacted_too(api, server):
    admin = api()
    admin.put("/api/v1/secrets/PASSWORD", json={"value": "hunter2-long"})
    script = make_script(admin, """export default async () => {
      throw new Error('login failed with ' + await almanac.secrets.get('PASSWORD'));
    }""")
    done = run(admin, script)
    assert done["status"] == "failed" and done["error"] == "Error: login failed with [secret PASSWORD]"


def test_another_tenant_reads_null_and_reaches_nothing(api, server):
    owner, other = api(), api()
    owner.put("/api/v1/secrets/API_TOKEN", json={"value": "owners-only"})
    owner.put("/api/v1/egress", json={"hosts": [f"127.0.0.1:{server.port}"]})
    script = make_script(other, f"""export default async () => {{
      let error = null;
      try {{ await fetch('{server.url('/json')}') }} catch (e) {{ error = e.message }}
      return {{secret: await almanac.secrets.get('API_TOKEN'), error}};
    }}""")
    done = run(other, script)
    assert done["output"] == {"secret": None, "error": f"fetch: the host 127.0.0.1:{server.port} is not on the "
                                                        "tenant's egress allowlist"}
    assert done["http"][0]["status"] is None and "allowlist" in done["http"][0]["error"]


def test_a_server_that_never_answers_ends_the_run_timed_out(api, server):
    admin = api()
    admin.put("/api/v1/egress", json={"hosts": [f"127.0.0.1:{server.port}"]})
    script = make_script(admin, f"""export default async () => {{
      try {{ await fetch('{server.url('/hang')}') }} catch (e) {{ return 'caught: ' + e.message }}
    }}""", timeout_ms=1000)
    done = run(admin, script)
    assert done["status"] == "timed_out", done
    assert done["http"][0]["url"] == server.url("/hang") and done["http"][0]["status"] is None


def test_fetches_are_counted_by_outcome(api, server, app):
    from fastapi.testclient import TestClient

    admin = api()
    admin.put("/api/v1/egress", json={"hosts": [f"127.0.0.1:{server.port}"]})
    script = make_script(admin, f"""export default async () => {{
      await fetch('{server.url('/json')}');
      await fetch('{server.url('/status/500')}');
      try {{ await fetch('https://elsewhere.example/') }} catch (e) {{}}
    }}""")
    metrics = TestClient(app).get("/metrics").text
    before = {o: _count(metrics, o) for o in ("ok", "http_error", "refused")}
    assert run(admin, script)["status"] == "succeeded"
    metrics = TestClient(app).get("/metrics").text
    assert {o: _count(metrics, o) - before[o] for o in before} == {"ok": 1, "http_error": 1, "refused": 1}


def _count(metrics: str, outcome: str) -> float:
    prefix = f'almanac_fetch_requests_total{{outcome="{outcome}"}} '
    return next(float(line[len(prefix):]) for line in metrics.splitlines() if line.startswith(prefix))


def test_the_exchange_rates_starter_emails_when_a_rate_moves_more_than_one_percent(api, server):
    from almanac.web.views.script_extras import starter

    admin = api()
    admin.put("/api/v1/egress", json={"hosts": [f"127.0.0.1:{server.port}"]})
    source = starter("exchange-rates").source.replace("https://api.frankfurter.app", server.url(""))
    script = make_script(admin, source)
    server.routes["/latest"] = (200, {"date": "2026-11-20", "rates": {"USD": 1.08, "GBP": 0.85}})
    assert run(admin, script, {"base": "EUR"})["output"] == {"date": "2026-11-20", "count": 2, "moved": 0}
    server.routes["/latest"] = (200, {"date": "2026-11-21", "rates": {"USD": 1.10, "GBP": 0.851}})
    moved = run(admin, script, {"base": "EUR"})
    assert moved["output"] == {"date": "2026-11-21", "count": 2, "moved": 1}, moved  # USD +1.9 %, GBP +0.1 %
    assert admin.get("/api/v1/kv/rates:EUR:latest").json()["value"]["date"] == "2026-11-21"


def test_the_own_api_reminder_starter_calls_the_api_with_the_bearer_secret(api, server):
    from almanac.web.views.script_extras import starter

    admin = api()
    admin.put("/api/v1/egress", json={"hosts": [f"127.0.0.1:{server.port}"]})
    admin.put("/api/v1/secrets/API_TOKEN", json={"value": "key-from-the-vault"})
    source = starter("own-api-reminder").source.replace("https://api.example.com", server.url(""))
    server.routes["/v1/customers/42"] = (200, {"id": 42, "unsubscribed": False})
    server.routes["/v1/customers/42/notifications"] = (201, {"queued": True})
    done = run(admin, make_script(admin, source), {"customer": 42, "message": "Trial ends soon"})
    assert done["output"] == {"notified": 42}, done
    posted = server.seen[-1]
    assert posted["method"] == "POST" and '"message": "Trial ends soon"' in posted["body"].replace('":"', '": "')
    assert {k.lower(): v for k, v in posted["headers"].items()}["authorization"] == "Bearer key-from-the-vault"
    assert [r["status"] for r in done["http"]] == [200, 201]


def test_non_ascii_urls_go_out_encoded_and_a_refused_header_is_recorded_with_its_error(api, server):
    admin = api()
    admin.put("/api/v1/egress", json={"hosts": [f"127.0.0.1:{server.port}"]})
    script = make_script(admin, f"""export default async () => {{
      const out = [];
      for (const [url, init] of [['{server.url('/döcs?q=zoë')}', {{}}],
                                 ['{server.url('/json')}', {{headers: {{'X-Name': 'Zoë'}}}}]]) {{
        try {{ out.push((await fetch(url, init)).status) }} catch (e) {{ out.push(e.message) }}
      }}
      return out;
    }}""")
    done = run(admin, script)
    assert done["status"] == "succeeded", done
    status, refusal = done["output"]
    assert status == 404 and "X-Name" in refusal and "ASCII" in refusal
    encoded, refused = done["http"]
    assert encoded["url"] == server.url("/d%C3%B6cs?q=zo%C3%AB") and encoded["status"] == 404
    assert refused["url"] == server.url("/json") and refused["status"] is None and refused["error"] == refusal


def test_a_runs_deadline_counts_from_when_its_script_starts(api, server):
    """A run that waited in the sandbox pool behind another still has its whole timeout for its fetch."""
    import threading
    import time

    admin = api()
    admin.put("/api/v1/egress", json={"hosts": [f"127.0.0.1:{server.port}"]})
    busy = make_script(admin, "export default () => { const t = Date.now(); while (Date.now() - t < 2000) {} return 1; }",
                       timeout_ms=5000)
    answer = admin.post("/api/v1/scripts", json={"name": "fetcher", "timeout_ms": 1000, "source": f"""
        export default async () => (await fetch('{server.url('/json')}')).status;"""})
    fetcher = answer.json()["id"]
    run(admin, busy)  # the pool is up and the busy script's module is compiled before the timed part
    first: list[dict] = []
    ahead = threading.Thread(target=lambda: first.append(run(admin, busy)))
    ahead.start()
    deadline = time.monotonic() + 10
    while not admin.get("/api/v1/runs", params={"status": "running"}).json()["items"]:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    behind = run(admin, fetcher)  # waits about 2 s for the one sandbox process, then runs
    ahead.join(30)
    assert first[0]["status"] == "succeeded"
    assert (behind["status"], behind["output"], behind["error"]) == ("succeeded", 200, None), behind
