"""The wasm rewriter behind the sandbox's snapshot: exports, memory and globals."""

import wasmtime
from hypothesis import given, strategies as st

from almanac.sandbox import _wasm_image as wi

WAT = """
(module
  (memory (export "memory") 1)
  (global $counter (mut i32) (i32.const 7))
  (global $fixed i32 (i32.const 11))
  (data (i32.const 16) "hello")
  (func $hidden (result i32) (i32.add (global.get $counter) (global.get $fixed)))
  (func (export "load") (param i32) (result i32) (i32.load8_u (local.get 0))))
"""


def _instance(wasm: bytes):
    store = wasmtime.Store()
    return store, wasmtime.Instance(store, wasmtime.Module(store.engine, wasm), [])


@given(st.integers(min_value=0, max_value=(1 << 64) - 1))
def test_uleb_round_trips(value):
    encoded = wi.uleb(value)
    assert wi.read_uleb(encoded, 0) == (value, len(encoded))


@given(st.lists(st.tuples(st.integers(0, 65535), st.binary(min_size=1, max_size=300)), max_size=20))
def test_segments_rebuild_the_memory_exactly(writes):
    memory = bytearray(65536)
    for offset, data in writes:
        memory[offset:offset + len(data)] = data[:65536 - offset]
    rebuilt = bytearray(65536)
    for offset, chunk in wi._segments(bytes(memory)):
        assert chunk and chunk[0] != 0 and chunk[-1] != 0
        rebuilt[offset:offset + len(chunk)] = chunk
    assert rebuilt == memory


def test_internal_functions_and_globals_can_be_exported_by_name():
    wasm = wi.add_exports(wasmtime.wat2wasm(WAT), {"peek": "hidden"}, {"counter": 0})
    store, instance = _instance(wasm)
    exports = instance.exports(store)
    assert exports["peek"](store) == 18
    assert exports["counter"].value(store) == 7


def test_snapshot_replaces_memory_and_sets_globals():
    wasm = wi.add_exports(wasmtime.wat2wasm(WAT), {"peek": "hidden"}, {"counter": 0})
    memory = bytearray(2 * wi.PAGE)
    memory[100:103] = b"abc"
    memory[wi.PAGE + 5] = 9  # in a page the original module did not have
    image = wi.snapshot(wasm, bytes(memory), {0: 0xFFFFFFFF})
    store, instance = _instance(image)
    exports = instance.exports(store)
    assert exports["memory"].size(store) == 2
    assert [exports["load"](store, i) for i in (16, 100, 102, wi.PAGE + 5)] == [0, ord("a"), ord("c"), 9]
    assert exports["counter"].value(store) == -1
    assert exports["peek"](store) == 10  # -1 + the immutable global, untouched


def test_a_module_without_names_is_refused_clearly():
    bare = wasmtime.wat2wasm("(module (func))")
    sections = [s for s in wi.parse(bare) if s.custom_name() != "name"]
    try:
        wi.add_exports(wi.build(sections), {"x": "y"}, {})
    except wi.WasmFormatError as exc:
        assert "name section" in str(exc)
    else:
        raise AssertionError("expected WasmFormatError")
