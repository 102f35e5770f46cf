"""The capability bridge: every host function a script can call, and isolation.

Each test that exercises a bridge op or a WASI import says so with
``@covers(...)``; ``test_every_host_function_has_a_test`` keeps the registry
and the tests in step.
"""

import ctypes
import re
from pathlib import Path

import pytest

from almanac.sandbox import Capabilities, CapabilityError, InMemoryCapabilities, Limits
from almanac.sandbox import _bridge, _native, _wasi
from almanac.sandbox.capabilities import METHODS, REGISTRY, ForwardingCapabilities


def covers(*names):
    def mark(test):
        return test
    return mark


@covers("kv.get", "kv.set")
def test_kv_set_then_get_round_trips_json(run, caps):
    r = run("""export default async () => {
      await almanac.kv.set('a', {n: 1, s: 'é', l: [true, null]});
      return [await almanac.kv.get('a'), await almanac.kv.get('missing')];
    }""", caps=caps)
    assert r.output == [{"n": 1, "s": "é", "l": [True, None]}, None]
    assert caps.kv == {"a": {"n": 1, "s": "é", "l": [True, None]}}


@covers("kv.delete", "kv.list")
def test_kv_delete_and_list_by_prefix(run):
    caps = InMemoryCapabilities({"user:1": 1, "user:2": 2, "order:1": 3})
    r = run("""export default async () => {
      await almanac.kv.delete('user:2');
      return [await almanac.kv.list('user:'), await almanac.kv.list()];
    }""", caps=caps)
    assert r.output == [["user:1"], ["order:1", "user:1"]]


@covers("kv.set")
def test_kv_value_over_the_cap_throws_inside_the_script(run, caps):
    r = run("""export default async () => {
      try { await almanac.kv.set('big', 'x'.repeat(70000)); return 'stored' }
      catch (e) { return e.message }
    }""", caps=caps)
    assert r.output == "kv value for 'big' is 70002 bytes, over the 65536-byte limit"
    assert caps.kv == {}


@covers("kv.set")
def test_kv_value_cap_follows_limits(run, caps):
    r = run("export default async () => { await almanac.kv.set('k', 'x'.repeat(50)) }",
            caps=caps, kv_value_bytes=10)
    assert r.status == "failed" and "over the 10-byte limit" in r.error and r.error_line == 1


@covers("kv.get")
def test_bad_key_type_is_a_js_error(run, caps):
    r = run("export default async () => { try { await almanac.kv.get(42) } catch (e) { return e.message } }",
            caps=caps)
    assert r.output == "key must be a non-empty string"


@covers("emit")
def test_emit(run, caps):
    r = run("export default async (e) => { await almanac.emit('order.escalate', {order: e.payload}) }",
            {"payload": 7}, caps=caps)
    assert r.status == "succeeded" and caps.emitted == [("order.escalate", {"order": 7})]


@covers("schedule.at")
def test_schedule_at_with_and_without_key(run, caps):
    r = run("""export default async () => [
      await almanac.schedule.at('2026-12-01T09:00:00Z', {order: 7}, {key: 'recheck-7'}),
      await almanac.schedule.at('2026-12-02T09:00:00Z', null),
    ]""", caps=caps)
    assert r.output[0] == {"key": "recheck-7", "runAt": "2026-12-01T09:00:00Z"}
    assert set(caps.scheduled) == {"recheck-7", r.output[1]["key"]}


@covers("emit", "schedule.at")
def test_capability_error_becomes_a_js_error_with_its_message(run):
    class Picky(InMemoryCapabilities):
        def kv_get(self, key):
            raise CapabilityError(f"cannot read {key!r}")

    r = run("export default async () => { await almanac.schedule.at('soon', 1) }")
    assert (r.status, r.error, r.error_line) == ("failed", "Error: schedule.at cannot read the date-time 'soon'", 1)
    r = run("export default async () => { await almanac.kv.get('k') }", caps=Picky())
    assert (r.status, r.error, r.error_line) == ("failed", "Error: cannot read 'k'", 1)


def test_a_platform_bug_in_a_capability_does_not_escape(run):
    class Broken(InMemoryCapabilities):
        def kv_get(self, key):
            raise RuntimeError("database is down")

    r = run("export default async () => { try { await almanac.kv.get('k') } catch (e) { return e.message } }",
            caps=Broken())
    assert r.output == "kv.get failed in the host"


def test_capabilities_return_promises(run):
    r = run("export default () => [almanac.kv.get('x') instanceof Promise, Object.isFrozen(almanac)]")
    assert r.output == [True, True]


@covers("kv.get", "kv.list")
def test_tenants_cannot_see_each_other(sandbox):
    tenant_a, tenant_b = InMemoryCapabilities(), InMemoryCapabilities()
    write = "export default async (e) => { await almanac.kv.set('secret', e.payload) }"
    read = "export default async () => [await almanac.kv.get('secret'), await almanac.kv.list('')]"
    written = sandbox.run(write, {"payload": "a-only"}, Limits(), tenant_a)
    assert written.status == "succeeded"
    tenant_a.apply(written.effects)
    assert sandbox.run(read, {}, Limits(), tenant_b).output == [None, []]
    assert sandbox.run(read, {}, Limits(), tenant_a).output == ["a-only", ["secret"]]


@covers("finish")
def test_result_and_error_are_reported_once(run):
    # finish is the bootstrap's; the first report counts, later ones are ignored.
    io = _wasi.RunIO(0.0, 0, 100, 100, None)
    io.memory = _host_memory(bytearray(b'"first""later"'))
    _wasi.host_finish(io, _wasi.FINISH_RESULT, 0, 7)
    _wasi.host_finish(io, _wasi.FINISH_ERROR, 7, 7)
    assert io.finished == (_wasi.FINISH_RESULT, b'"first"')
    assert run("export default () => { throw new Error('x') }").error == "Error: x"


@covers("malformed")
@pytest.mark.parametrize("request_", [b"not json", b'["nope", []]', b'["kv.get", "k"]', b'["kv.set", ["k", NaN]]',
                                      b'["kv.set", ["k", ' + b"[" * 20000 + b"]" * 20000 + b"]]", b"\xff\xfe",
                                      b'["kv.get"]', b"[]", b"{}"])
def test_malformed_requests_are_refused(request_):
    caps = InMemoryCapabilities()
    answer = _bridge.Bridge(caps, Limits()).handle(request_)
    deep = b"[" * 20000 in request_  # the one refusal that says why: the script can fix it
    assert answer == (b'{"e":"malformed request: nested too deeply"}' if deep else b'{"e":"malformed request"}')
    assert caps.kv == {}


@covers("call", "reply")
def test_a_request_over_the_cap_is_refused_unread(run, caps):
    io = _wasi.RunIO(float("inf"), 0, 0, 10, lambda request: 1 / 0)  # a read would fail
    io.memory = _host_memory(bytearray(8))
    assert _wasi.host_call(io, 2**31, 11) == len(b'{"e":"request too large"}')
    _wasi.host_reply(io, 0, 8)
    assert bytes(io.memory.read(0, 8)) == b'{"e":"re'


@covers("log")
def test_logs_are_read_only_up_to_the_cap():
    io = _wasi.RunIO(float("inf"), 4, 0, 0, None)
    io.memory = _host_memory(bytearray(b"abcdef"))
    _wasi.host_log(io, 0, 2**31)  # reading that much would fault: only the room is read
    assert (bytes(io.logs), io.logs_truncated) == (b"abcd", True)


# --- WASI imports: refusals, and a clock ----------------------------------------

@covers("clock_time_get", "fd_close", "fd_fdstat_get", "fd_seek", "fd_write", "proc_exit", "idle")
def test_wasi_imports_are_covered_by_the_run_and_hostile_suites():
    """Every run reads the clock; the fd_* refusals are pinned by test_sandbox_boundary
    (no descriptor exists), proc_exit by test_exit_stops_the_run, idle by the hostile
    suite (never_settles).  This test pins the list."""
    assert set(_wasi.IMPORTS) == {
        ("wasi_snapshot_preview1", name) for name in
        ("clock_time_get", "fd_close", "fd_fdstat_get", "fd_seek", "fd_write", "proc_exit")} | {
        ("almanac", name) for name in ("call", "reply", "log", "finish", "idle")}


def test_exit_stops_the_run():
    io = _wasi.RunIO(float("inf"), 0, 0, 0, None)
    with pytest.raises(_wasi.HostExit):
        _wasi.proc_exit(io, 0)
    assert io.exit_reason == "exit"


def test_the_registry_is_the_protocol():
    # The bridge's ops, the forwarding proxy and the pool's methods all derive from REGISTRY:
    # remote entries are the host's protocol, writes are served by the run's own buffer.
    from almanac.sandbox.capabilities import REMOTE
    from almanac.sandbox.effects import RunBuffer

    protocol = {name for name in vars(Capabilities) if not name.startswith("_")}
    assert {c.method for c in REGISTRY if not c.writes} | {"allowance"} == protocol == set(REMOTE)
    assert {c.method for c in REGISTRY} == set(METHODS)
    assert all(callable(getattr(RunBuffer, c.method)) for c in REGISTRY if c.writes)
    assert set(_bridge.OPS) == {c.op for c in REGISTRY}
    assert all(callable(getattr(ForwardingCapabilities, name)) for name in protocol)


def _host_memory(data: bytearray):
    buf = (ctypes.c_char * len(data)).from_buffer(data)
    memory = _native.Memory.__new__(_native.Memory)
    memory.raw, memory.addr = buf, 0
    memory.base, memory.size = ctypes.addressof(buf), len(data)
    return memory


def test_every_host_function_has_a_test():
    here = Path(__file__).read_text()
    covered = set()
    for args in re.findall(r"@covers\(([^)]*)\)", here):
        covered |= set(re.findall(r'"([^"]+)"', args))
    registered = set(_bridge.OPS) | {name for _, name in _wasi.IMPORTS}
    assert registered - covered == set(), "host functions without a test"
    assert covered - registered - {"malformed"} == set(), "tests for host functions that are gone"


@covers("kv.set")
def test_oversized_request_is_refused_without_buffering_it(run, caps):
    r = run("""export default async () => {
      try { await almanac.kv.set('k', 'x'.repeat(9 * 1024 * 1024)) } catch (e) { return e.message }
    }""", caps=caps, memory_mb=128, timeout_ms=5000)
    assert r.output == "request too large" and caps.kv == {}


def _answering(calls, status=200, body='{"rate": 1.1}', headers=(("Content-Type", "application/json"),)):
    def fetcher(url, method, headers_in, body_in, deadline):
        calls.append({"url": url, "method": method, "headers": headers_in, "body": body_in, "deadline": deadline})
        return {"status": status, "statusText": "OK", "url": url, "headers": [list(h) for h in headers],
                "body": body}
    return fetcher


@covers("fetch")
def test_fetch_gives_a_response_with_the_web_subset(run):
    calls = []
    caps = InMemoryCapabilities(fetcher=_answering(calls))
    r = run("""export default async () => {
      const res = await fetch('https://api.example.com/rates', {method: 'POST',
        headers: {'X-Key': 'k', Accept: 'application/json'}, body: JSON.stringify({a: 1})});
      return {status: res.status, ok: res.ok, type: res.headers.get('content-type'),
              missing: res.headers.get('x-nope'), json: await res.json(), text: await res.text(),
              global: typeof fetch, hasResponse: typeof Response};
    }""", caps=caps, timeout_ms=2000)
    assert r.status == "succeeded", r.error
    assert r.output == {"status": 200, "ok": True, "type": "application/json", "missing": None,
                        "json": {"rate": 1.1}, "text": '{"rate": 1.1}', "global": "function",
                        "hasResponse": "undefined"}
    (call,) = calls
    assert call["url"] == "https://api.example.com/rates" and call["method"] == "POST"
    assert call["headers"] == [["X-Key", "k"], ["Accept", "application/json"]] and call["body"] == '{"a":1}'


@covers("fetch")
def test_fetch_is_given_the_runs_own_deadline(run):
    import time

    calls = []
    before = time.monotonic()
    r = run("export default async () => (await fetch('https://a.example/')).status",
            caps=InMemoryCapabilities(fetcher=_answering(calls, status=404)), timeout_ms=3000)
    assert r.output == 404
    assert before + 2.5 < calls[0]["deadline"] <= time.monotonic() + 3.0


@covers("fetch")
def test_fetch_refusals_reject_in_the_script(run):
    def refuse(url, *args):
        raise CapabilityError(f"fetch: the host {url} is not on the tenant's egress allowlist")

    r = run("""export default async () => {
      const out = [];
      for (const args of [['https://evil.example/'], ['https://a.example/', {body: {a: 1}}],
                          ['https://a.example/', {headers: [['only-name']]}]]) {
        try { await fetch(...args); out.push('sent') } catch (e) { out.push(e.message) }
      }
      return out;
    }""", caps=InMemoryCapabilities(fetcher=refuse), timeout_ms=2000)
    assert r.output == ["fetch: the host https://evil.example/ is not on the tenant's egress allowlist",
                        "fetch: the body must be a string (JSON.stringify an object first)",
                        "fetch: headers must be [name, value] pairs"]


@covers("fetch")
def test_a_fetch_body_up_to_one_mib_reaches_the_host_and_a_larger_one_does_not(run):
    calls = []
    r = run("""export default async () => {
      await fetch('https://a.example/', {method: 'PUT', body: 'x'.repeat(1024 * 1024)});
      try { await fetch('https://a.example/', {method: 'PUT', body: 'x'.repeat(1024 * 1024 + 1)}) }
      catch (e) { return e.message }
    }""", caps=InMemoryCapabilities(fetcher=_answering(calls)), timeout_ms=5000, memory_mb=64)
    assert r.output == "fetch: the request body is over the 1048576-byte limit"
    assert len(calls) == 1 and len(calls[0]["body"]) == 1024 * 1024


@covers("secrets.get")
def test_secrets_get_gives_the_value_or_null(run):
    caps = InMemoryCapabilities(secrets={"API_TOKEN": "s3cr3t"})
    r = run("""export default async () => [await almanac.secrets.get('API_TOKEN'),
                                            await almanac.secrets.get('OTHER')]""", caps=caps)
    assert r.output == ["s3cr3t", None]
