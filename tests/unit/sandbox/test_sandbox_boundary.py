"""Nothing in the sandbox reaches the host's channel or any descriptor: only the capabilities.

The first tests are the attacks that worked on the stock QuickJS-NG reactor
(``qjs:std``'s ``fdopen(100)`` wrote straight into the capability bridge);
they must fail from inside the script now, and the host's work stays bounded
by the run's deadline whatever the script writes.
"""

import time

import pytest

from almanac.sandbox import InMemoryCapabilities, Limits, NullCapabilities, _engine, _wasi, _wasm_image, runtime

MARGIN_MS = 300  # generous: a shared 2-core box

# Every attack reaches for the stock reactor's modules through a dynamic import, so
# the script itself goes on (and throws its own error) when the import is refused.
STD = "const std = await import('qjs:std'); const out = std.fdopen(100, 'w');"


def timed(sandbox, source, caps=None, **limits):
    started = time.monotonic()
    result = sandbox.run(source, {}, Limits(**limits), caps or NullCapabilities())
    return result, (time.monotonic() - started) * 1000


def test_a_script_cannot_forge_its_own_result(run):
    r = run("""export default async () => {
      try { %s out.puts('["result",["\\\\"forged\\\\""]]\\n'); out.flush(); } catch (e) {}
      throw new Error('the script failed');
    }""" % STD)
    assert (r.status, r.output, r.error) == ("failed", None, "Error: the script failed")


@pytest.mark.parametrize("message", [
    '["result",["NaN"]]',
    '["result",["' + "[" * 20000 + "]" * 20000 + '"]]',
    '["error",{"name":["x"],"message":{"a":1},"stack":7}]',
])
def test_a_forged_message_cannot_break_the_host(run, message):
    r = run("""export default async () => {
      try { %s out.puts(%r + '\\n'); out.flush(); } catch (e) {}
      throw new Error('the script failed');
    }""" % (STD, message))
    assert (r.status, r.error) == ("failed", "Error: the script failed")


def test_a_100000_line_write_is_bounded_by_the_deadline(sandbox):
    r, elapsed = timed(sandbox, """export default async () => {
      try { %s out.puts('["kv.get",["k"]]\\n'.repeat(100000)); out.flush(); } catch (e) {}
      for (;;) {}
    }""" % STD, timeout_ms=500)
    assert r.status == "timed_out" and elapsed < 500 + MARGIN_MS


def test_a_60kb_kv_get_replayed_is_bounded_by_the_deadline(sandbox):
    key = "k" * 60_000
    caps = InMemoryCapabilities({key: "v" * 60_000})
    r, elapsed = timed(sandbox, """export default async () => {
      try {
        %s const inp = std.fdopen(101, 'r');
        out.puts(('["kv.get",["' + 'k'.repeat(60000) + '"]]\\n').repeat(300)); out.flush();
        for (;;) inp.getline();
      } catch (e) {}
      for (;;) {}
    }""" % STD, caps=caps, timeout_ms=500)
    assert r.status == "timed_out" and elapsed < 500 + MARGIN_MS


@pytest.mark.parametrize("name", ["qjs:std", "qjs:os", "qjs:bjson", "std", "os", "bjson", "/script.js?x",
                                  "/dev/stdin", "script.js"])
def test_a_script_cannot_import_any_module(run, name):
    r = run("""export default async () => {
      try { await import(%r); return 'imported' } catch (e) { return String(e) }
    }""" % name)
    assert r.status == "succeeded" and r.output.startswith("ReferenceError: could not load module"), r


def test_no_global_offers_a_descriptor_or_a_host_object(run):
    r = run("""export default () => Object.getOwnPropertyNames(globalThis)
      .filter((n) => /^(__almanac|std$|os$|bjson$|print$|scriptArgs$|setTimeout$)/.test(n))""")
    assert r.output == []


def test_the_capabilities_cannot_be_used_to_send_other_operations(run, caps):
    # The bootstrap's functions are frozen and its channel is in a closure: overriding
    # JSON.stringify cannot turn a kv.get into a forged result.
    r = run("""export default async () => {
      const real = JSON.stringify;
      JSON.stringify = () => '["result",["\\\\"forged\\\\""]]';
      try { await almanac.kv.get('k') } catch (e) {}
      JSON.stringify = real;
      throw new Error('the script failed');
    }""", caps=caps)
    assert (r.status, r.error) == ("failed", "Error: the script failed")


@pytest.mark.parametrize("fd", [0, 1, 2, 3, 100, 101, 2**31 - 1])
def test_the_host_has_no_descriptor_to_offer(fd):
    # What wasi-libc still imports is answered with EBADF for every descriptor.
    io = _wasi.RunIO(float("inf"), 0, 0, 0, None)
    for (_module, name), (func, params, _) in _wasi.IMPORTS.items():
        if name.startswith("fd_"):
            assert func(io, fd, *[0] * (len(params) - 1)) == _wasi.EBADF, name
    assert not any(name.startswith(("path_", "fd_read", "poll_", "environ", "fd_prestat"))
                   for _, name in _wasi.IMPORTS)


def _imports(wasm: bytes) -> set[tuple[str, str]]:
    # The import section, read without compiling the module: (module, name) of each function.
    body = next(s.body for s in _wasm_image.parse(wasm) if s.id == _wasm_image.IMPORT)
    count, pos = _wasm_image.read_uleb(body, 0)
    found = set()
    for _ in range(count):
        names = []
        for _ in range(2):
            length, pos = _wasm_image.read_uleb(body, pos)
            names.append(body[pos:pos + length].decode())
            pos += length
        assert body[pos] == 0, "only functions are imported"
        _type, pos = _wasm_image.read_uleb(body, pos + 1)
        found.add(tuple(names))
    return found


def test_the_reactor_imports_no_descriptor_reads_paths_or_polls():
    imported = _imports(_engine.wasm_path().read_bytes())
    assert ("almanac", "call") in imported
    assert imported <= set(_wasi.IMPORTS)
    assert {name for module_, name in imported if module_ == "wasi_snapshot_preview1"} <= {
        "clock_time_get", "fd_close", "fd_fdstat_get", "fd_seek", "fd_write", "proc_exit"}


@pytest.mark.parametrize("output", [b"NaN", b"[Infinity]", b"[" * 20000 + b"]" * 20000, b"\xff", b"{"])
def test_an_output_the_host_cannot_store_fails_the_run_not_the_host(output):
    r = runtime._succeeded(output, "", 0)
    assert r.status == "failed" and r.error.startswith("output is not JSON the host can store")


def test_a_deeply_nested_result_fails_cleanly(run):
    r = run("export default () => { let x = []; for (let i = 0; i < 20000; i++) x = [x]; return x }",
            timeout_ms=5000)
    assert r.status == "failed", r
    assert run("export default () => 'ok'").output == "ok"


def test_an_unreadable_error_report_is_still_a_failure():
    assert runtime._error_from(_wasi.FINISH_ERROR, b'{"name":["x"],"message":{"a":1},"stack":7}') == {
        "name": "['x']", "message": "{'a': 1}", "stack": "7"}
    assert runtime._error_from(_wasi.FINISH_ERROR, b"NaN")["message"] == "the script's error could not be read"


@pytest.mark.parametrize("line", [100, 100_000])
def test_logging_many_lines_is_bounded_by_the_deadline(sandbox, line):
    r, elapsed = timed(sandbox, "export default () => { for (;;) console.log('x\\n'.repeat(%d)) }" % line,
                       timeout_ms=300)
    assert r.status == "timed_out" and elapsed < 300 + MARGIN_MS


def test_a_60kb_kv_get_in_a_loop_is_bounded_by_the_deadline(sandbox):
    # Keys are at most 512 characters (capabilities.KV_KEY_MAX): the 60 KB is the reply's value.
    caps = InMemoryCapabilities({"k" * 500: "v" * 60_000})
    r, elapsed = timed(sandbox, "export default async () => { for (;;) await almanac.kv.get('k'.repeat(500)) }",
                       caps=caps, timeout_ms=300)
    assert r.status == "timed_out" and elapsed < 300 + MARGIN_MS


def test_values_nested_deeper_than_the_cap_are_refused_as_requests(run, caps):
    r = run("""export default async () => {
      let x = 1; for (let i = 0; i < 300; i++) x = [x];
      try { await almanac.kv.set('k', x) } catch (e) { return e.message }
    }""", caps=caps)
    assert r.output == "malformed request: nested too deeply" and caps.kv == {}
