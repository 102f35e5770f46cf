"""Our QuickJS-NG reactor is the committed binary, rebuilt reproducibly; wasmtime is the pinned one."""

import hashlib
import os
import subprocess
import sys

import pytest

from almanac.sandbox import _engine, _native
from almanac.sandbox.reactor import build


def test_the_committed_reactor_is_the_one_the_build_records():
    assert hashlib.sha256(_engine.wasm_path().read_bytes()).hexdigest() == build.WASM_SHA256


@pytest.mark.slow
@pytest.mark.skipif(os.environ.get("ALMANAC_TEST_WASM_BUILD") != "1",
                    reason="rebuilding takes minutes: ALMANAC_TEST_WASM_BUILD=1 (or make sandbox-wasm-check)")
def test_rebuilding_from_the_pinned_sources_gives_the_same_bytes(tmp_path):
    assert build.build(tmp_path / "again.wasm") == build.WASM_SHA256


def test_any_other_wasmtime_version_is_refused_with_the_expected_one_named():
    with pytest.raises(_native.WasmtimeVersionError, match=r"needs wasmtime==50\.0\.1 \(found 49\.0\.0\)"):
        _native.check_version("49.0.0")
    with pytest.raises(ImportError, match="found none"):
        _native.check_version(None)
    _native.check_version(_native.WASMTIME)


def test_the_check_runs_at_import():
    code = ("import importlib.metadata as m; real = m.version\n"
            "m.version = lambda name: '51.0.0' if name == 'wasmtime' else real(name)\n"
            "from almanac.sandbox import Sandbox")  # the package loads lazily: its contract needs no wasmtime
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode != 0
    assert "needs wasmtime==50.0.1 (found 51.0.0)" in out.stderr


def test_the_public_api_fallback_runs_scripts_and_keeps_the_caps():
    from almanac.sandbox import InMemoryCapabilities, Limits, NullCapabilities
    from almanac.sandbox._public import PublicSandbox

    box = PublicSandbox()
    try:
        caps = InMemoryCapabilities()
        r = box.run("export default async (e) => { await almanac.kv.set('a', e.n); console.log('x');"
                    " return e.n + 1 }", {"n": 1}, Limits(), caps)
        caps.apply(r.effects)
        assert (r.status, r.output, r.logs, caps.kv) == ("succeeded", 2, ("x",), {"a": 1})
        assert box.run("export default () => { for (;;) {} }", {}, Limits(timeout_ms=100),
                       NullCapabilities()).status == "timed_out"
        assert box.run("export default () => new ArrayBuffer(1e9)", {}, Limits(memory_mb=8),
                       NullCapabilities()).status == "memory_exceeded"
    finally:
        box.close()


def test_jobs_too_large_for_the_run_buffer_are_allocated(run, sandbox):
    # Small jobs are written into the reactor's static run buffer; larger ones need a malloc.
    padding = "//" + "x" * sandbox._shared.buffer_size + "\n"
    r = run(padding + "export default (e) => e.s.length", {"s": "é" * 10})
    assert (r.status, r.output) == ("succeeded", 10)


def test_work_left_queued_behind_the_result_is_not_run(run, caps):
    # As with js_std_await on the stock reactor: the run ends when its promise settles.
    r = run("""export default async () => {
      (async () => { for (;;) await null })();
      (async () => { for (let i = 0; i < 50; i++) await null; await almanac.kv.set('late', 1) })();
      return 1;
    }""", caps=caps, timeout_ms=2000)
    assert (r.status, r.output, caps.kv) == ("succeeded", 1, {})
