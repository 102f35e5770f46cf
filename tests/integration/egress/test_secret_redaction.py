"""A secret's value never reaches what a run leaves behind, in any form it takes there (SPEC section 6):
escaped or encoded, cut by a length limit, or copied by the script into a planned job or an emitted
event. Real runs in the sandbox, on SQLite and PostgreSQL."""

from __future__ import annotations

import json
from urllib.parse import quote, quote_plus

import pytest
from sqlalchemy import text

from almanac.db import schema_for
from tests.support.httpservers import LocalServer

# A quote, a backslash, a space, a slash and a non-ASCII letter: each is written differently by
# JSON (escaped, or as \uXXXX) and by URL encoding.
AWKWARD = 'pa"ss\\wörd / Zq9-key'
LONG = "Zq9-long-api-key-0123456789abcdef"


@pytest.fixture
def settings(settings):
    return settings.model_copy(update={"allow_private_targets": True, "sandbox_processes": 1})


@pytest.fixture(scope="module")
def server():
    s = LocalServer()
    yield s
    s.close()


def make_script(client, source: str) -> int:
    answer = client.post("/api/v1/scripts", json={"name": "s", "source": source, "timeout_ms": 5000})
    assert answer.status_code == 201, answer.text
    return answer.json()["id"]


def run(client, script_id: int, payload=None) -> dict:
    answer = client.post(f"/api/v1/scripts/{script_id}/run", json={"payload": payload or {}})
    assert answer.status_code == 200, answer.text
    return answer.json()


def forms(value: str) -> list[str]:
    """The ways a value shows in stored text when nothing redacts it (what the tests look for)."""
    once = json.dumps(value, ensure_ascii=False)[1:-1]
    return [value, once, json.dumps(value)[1:-1], json.dumps(once, ensure_ascii=False)[1:-1], json.dumps(once)[1:-1],
            quote(value, safe=""), quote_plus(value, safe=""), quote(value, safe="!'()*")]


def leaks(stored: object, value: str) -> list[str]:
    shown = json.dumps(stored, ensure_ascii=False)
    # The stored record is read back as JSON, so look in its decoded text as well as in its JSON.
    return [form for form in forms(value) for place in (shown, str(stored)) if form in place]


def test_escaped_and_encoded_forms_of_a_secret_are_redacted_in_logs_output_and_error(api, server):
    admin = api()
    admin.put("/api/v1/egress", json={"hosts": [f"127.0.0.1:{server.port}"]})
    assert admin.put("/api/v1/secrets/AWKWARD", json={"value": AWKWARD}).status_code == 201
    script = make_script(admin, f"""export default async (event) => {{
      const k = await almanac.secrets.get('AWKWARD');
      console.log({{k}});
      console.log('query', encodeURIComponent(k));
      console.log('nested', JSON.stringify(JSON.stringify({{k}})));
      const echo = await fetch('{server.url('/echo')}', {{method: 'POST', body: JSON.stringify({{k}})}});
      const seen = await echo.text();  // the server answers in JSON with \\uXXXX for non-ASCII
      if (event.payload.fail) throw new Error(JSON.stringify({{k}}));
      return {{stringified: JSON.stringify({{k}}), echoed: seen}};
    }}""")
    done = run(admin, script)
    assert done["status"] == "succeeded", done
    assert '"k":"[secret AWKWARD]"' in done["output"]["stringified"]
    assert "[secret AWKWARD]" in done["output"]["echoed"]
    assert len(done["logs"]) == 3 and all("[secret AWKWARD]" in line for line in done["logs"]), done["logs"]
    assert leaks(admin.get(f"/api/v1/runs/{done['id']}").json(), AWKWARD) == []
    failed = run(admin, script, {"fail": True})
    assert failed["status"] == "failed" and failed["error"] == 'Error: {"k":"[secret AWKWARD]"}', failed["error"]
    assert leaks(admin.get(f"/api/v1/runs/{failed['id']}").json(), AWKWARD) == []


def _prefixes_left(stored: str, value: str) -> list[str]:
    """Prefixes of `value` of 4 characters or more that `stored` holds."""
    return [value[:n] for n in range(4, len(value) + 1) if value[:n] in stored]


@pytest.mark.parametrize("kind", ["refused-url", "network-error"])
def test_a_fetch_error_cut_to_length_keeps_no_part_of_a_secret(api, kind):
    admin = api()
    admin.put("/api/v1/egress", json={"hosts": ["127.0.0.1:9"]})
    admin.put("/api/v1/secrets/LONG", json={"value": LONG})
    if kind == "refused-url":  # "fetch <url cut to 200>: ..." (a scheme fetch refuses)
        start, cut = "ftp://127.0.0.1:9/?p=", 200
        url_at = 0
    else:  # "fetch <url> failed: ..." cut to 500 (nothing listens on the discard port)
        start, cut = "http://127.0.0.1:9/?p=", 500
        url_at = len("fetch ")
    pad = cut - url_at - len(start) - len(LONG) + 1  # the cut falls before the secret's last character
    script = make_script(admin, f"""export default async () => {{
      const url = '{start}' + 'x'.repeat({pad}) + await almanac.secrets.get('LONG');
      await fetch(url);
    }}""")
    done = run(admin, script)
    assert done["status"] == "failed", done
    (record,) = done["http"]
    assert record["error"] and _prefixes_left(record["error"], LONG) == [], record["error"]
    assert _prefixes_left(done["error"], LONG) == [], done["error"]
    assert record["url"].endswith("[secret LONG]")
    assert leaks(admin.get(f"/api/v1/runs/{done['id']}").json(), LONG) == []


def test_a_secret_shorter_than_four_characters_is_refused(api):
    admin = api()
    for value in ("a", "abc", "é1"):
        refused = admin.put("/api/v1/secrets/SHORT", json={"value": value})
        assert refused.status_code == 422 and refused.json()["error"]["code"] == "validation_error", value
    assert admin.get("/api/v1/secrets").json()["items"] == []
    assert admin.put("/api/v1/secrets/SHORT", json={"value": "abcd"}).status_code == 201


def test_a_secret_copied_into_a_planned_job_or_an_emitted_event_is_stored_redacted(api, database):
    admin = api()
    admin.put("/api/v1/secrets/AWKWARD", json={"value": AWKWARD})
    script = make_script(admin, """export default async () => {
      const k = await almanac.secrets.get('AWKWARD');
      await almanac.schedule.at(new Date(Date.now() + 86400000).toISOString(), {k, text: 'key=' + encodeURIComponent(k)}, {key: 'later'});
      almanac.emit('order.created', {k, nested: {list: [JSON.stringify(k)]}});
      await almanac.kv.set('mine', {k});  // kv is the tenant's data: kept as written
    }""")
    done = run(admin, script)
    assert done["status"] == "succeeded", done
    job = admin.get("/api/v1/jobs/later").json()
    assert job["payload"] == {"k": "[secret AWKWARD]", "text": "key=[secret AWKWARD]"}, job
    with database.tenant_connection(admin.tenant) as conn:
        (topic, data), = conn.execute(text(f'SELECT topic, data FROM "{schema_for(admin.tenant)}".events')).all()
    assert topic == "order.created"
    assert json.loads(data) == {"k": "[secret AWKWARD]", "nested": {"list": ['"[secret AWKWARD]"']}}
    assert leaks(data, AWKWARD) == []
    assert admin.get("/api/v1/kv/mine").json()["value"] == {"k": AWKWARD}


@pytest.mark.parametrize("where", ["log", "error"])
def test_a_log_line_or_error_cut_by_the_sandbox_keeps_no_part_of_a_secret(api, where):
    """The sandbox cuts logs at 64 KiB and an error message at 65,536 characters before the host can
    redact them: what is left of a value at the cut is replaced too."""
    admin = api()
    admin.put("/api/v1/secrets/LONG", json={"value": LONG})
    # The value, padding, and the value again, cut before its last character. (The value at the
    # start makes room: once it is replaced, the cut line fits the platform's own 64 KiB cap.)
    pad = 64 * 1024 - 2 * len(LONG)
    act = "console.log(text)" if where == "log" else "throw new Error(text)"
    script = make_script(admin, f"""export default async () => {{
      const k = await almanac.secrets.get('LONG');
      const text = k + ' ' + 'x'.repeat({pad}) + k;
      {act};
    }}""")
    done = run(admin, script)
    stored = admin.get(f"/api/v1/runs/{done['id']}").json()
    shown = "\n".join(stored["logs"]) if where == "log" else stored["error"]
    assert "x" * 100 in shown and _prefixes_left(shown, LONG) == [], shown[-80:]
    assert "[secret LONG" in shown  # cut again to fit the 64 KiB cap, perhaps, but named
