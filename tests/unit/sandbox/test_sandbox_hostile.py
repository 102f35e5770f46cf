"""Hostile scripts end with the right status, on time, and leave the sandbox usable."""

import time

import pytest

from almanac.sandbox import Limits, NullCapabilities

MARGIN_MS = 1500  # generous (a shared 2-core box, tests in parallel): the precision is bench/sandbox_bench.py's overshoot row
TIMEOUT_MS = 300

TIMEOUTS = {
    "busy_loop": "export default () => { while (true) {} }",
    "catch_the_interrupt": "export default () => { for (;;) { try { while (true) {} } catch (e) {} } }",
    "catastrophic_regex": "export default () => /(a+)+$/.test('a'.repeat(40) + 'b')",
    "async_loop": "export default async () => { for (;;) await null }",
    "never_settles": "export default () => new Promise(() => {})",
    "busy_in_top_level": "while (true) {}\nexport default () => 1",
    "busy_in_finally": "export default () => { try { throw 1 } finally { for (;;) {} } }",
    "log_forever": "export default () => { for (;;) console.log('spam') }",
    "kv_forever": "export default async () => { for (;;) await almanac.kv.get('k') }",
}

MEMORY = {
    "string_doubling": "export default () => { let s = 'a'; for (;;) s += s }",
    "flattened_doubling": "export default () => { let s = 'ab'; for (;;) { s += s; s.indexOf('c') } }",
    "many_small_strings": "export default () => { const a = []; for (;;) a.push('x' + a.length) }",
    "huge_array_buffer": "export default () => new ArrayBuffer(1e9).byteLength",
    "object_flood": "export default () => { const a = []; for (;;) a.push({a: 1, b: [1, 2]}) }",
    "huge_array": "export default () => new Array(1e8).fill(0).length",
    "caught_oom_rethrown": "export default () => { try { new ArrayBuffer(1e9) } catch (e) { throw e } }",
}


def timed(sandbox, source, **limits):
    started = time.monotonic()
    result = sandbox.run(source, {}, Limits(**limits), NullCapabilities())
    return result, (time.monotonic() - started) * 1000


def assert_still_healthy(sandbox):
    result, _ = timed(sandbox, "export default (e) => 'ok'")
    assert result.status == "succeeded" and result.output == "ok"


@pytest.mark.parametrize("name", TIMEOUTS)
def test_times_out_within_the_margin(sandbox, name):
    result, elapsed = timed(sandbox, TIMEOUTS[name], timeout_ms=TIMEOUT_MS)
    assert result.status == "timed_out", result
    assert TIMEOUT_MS - 5 <= elapsed <= TIMEOUT_MS + MARGIN_MS
    assert result.error == f"timed out after {TIMEOUT_MS} ms"
    assert_still_healthy(sandbox)


@pytest.mark.parametrize("name", MEMORY)
def test_memory_bombs_end_as_memory_exceeded(sandbox, name):
    result, _ = timed(sandbox, MEMORY[name], memory_mb=8, timeout_ms=5000)
    assert result.status == "memory_exceeded", result  # so it ended at the cap, before the 5 s deadline
    assert_still_healthy(sandbox)


def test_memory_cap_is_per_run_setting(sandbox):
    src = "export default () => new ArrayBuffer(20 * 1024 * 1024).byteLength"
    assert timed(sandbox, src, memory_mb=8)[0].status == "memory_exceeded"
    assert timed(sandbox, src, memory_mb=64)[0].output == 20 * 1024 * 1024


@pytest.mark.parametrize("source", [
    "export default () => { const f = (n) => f(n + 1) + 1; return f(0) }",
    "export default () => { let x = []; for (let i = 0; i < 1e5; i++) x = [x]; return JSON.stringify(x).length }",
    "export default () => { const f = (n) => { try { return f(n + 1) } catch (e) { return f(n + 1) } }; return f(0) }",
])
def test_deep_recursion_fails_without_harm(sandbox, source):
    result, elapsed = timed(sandbox, source, timeout_ms=2000)
    assert result.status in ("failed", "memory_exceeded"), result
    assert elapsed < 2000
    assert_still_healthy(sandbox)


def test_promise_flood_is_stopped(sandbox):
    src = "export default () => new Promise(() => { const f = () => Promise.resolve().then(f); f() })"
    result, elapsed = timed(sandbox, src, timeout_ms=TIMEOUT_MS, memory_mb=8)
    assert result.status in ("timed_out", "memory_exceeded")
    assert elapsed <= TIMEOUT_MS + MARGIN_MS


def test_forbidden_globals_are_undefined(run):
    # (`fetch` is a global since SPEC section 6 gave scripts one; it reaches only the tenant's allowlist.)
    names = ["process", "require", "std", "os", "setTimeout", "setInterval", "print",
             "scriptArgs", "navigator", "performance", "gc", "bjson", "XMLHttpRequest", "Deno"]
    src = "export default () => [%s]" % ", ".join(f"typeof {n}" for n in names)
    assert run(src).output == ["undefined"] * len(names)


@pytest.mark.parametrize("source", [
    "import 'std';\nexport default () => 1",
    "import * as os from 'os';\nexport default () => 1",
    "import fs from 'fs';\nexport default () => 1",
    "export default async () => await import('/etc/passwd')",
    "import x from './script2.js';\nexport default () => 1",
])
def test_host_modules_cannot_be_imported(run, source):
    r = run(source)
    assert r.status == "failed" and "could not load module" in r.error
