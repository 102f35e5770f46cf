"""The snapshot's refusals: a broken bootstrap, an image that would eat the scripts' heap."""

import pytest

from almanac.sandbox import Limits, NullCapabilities, Sandbox, _engine, _snapshot, _wasm_image
from almanac.sandbox import runtime


def test_a_bootstrap_that_throws_makes_no_image():
    wasm = _snapshot.with_exports(_engine.wasm_path().read_bytes())
    with pytest.raises(_snapshot.SnapshotError, match="bootstrap failed"):
        _snapshot.take(wasm, b"throw new Error('broken bootstrap')")


def test_our_reactor_is_stripped_so_internal_functions_cannot_be_exported():
    # It exports what a run needs (almanac_alloc, almanac_run) itself; no name section is shipped.
    wasm = _engine.wasm_path().read_bytes()
    with pytest.raises(_wasm_image.WasmFormatError, match="no name section"):
        _wasm_image.add_exports(wasm, {"x": "JS_Eval"}, {})


def test_an_image_that_outgrows_the_static_allowance_refuses_to_start(sandbox, monkeypatch):
    # The wall on linear memory is memory_mb + STATIC_MEMORY; an image as large as the
    # allowance would silently take the scripts' heap, so the sandbox will not start.
    monkeypatch.setattr(runtime, "STATIC_MEMORY", sandbox._shared.image_memory)
    with pytest.raises(RuntimeError, match="outgrew STATIC_MEMORY"):
        Sandbox()
    # The refused one gave its share of the engine back: the sandbox beside it still runs scripts.
    monkeypatch.undo()
    result = sandbox.run("export default () => 41 + 1", {}, Limits(), NullCapabilities())
    assert (result.status, result.output) == ("succeeded", 42)
