"""Build the image every run starts from: QuickJS initialised, the bootstrap evaluated.

``take`` instantiates the QuickJS reactor (with a few internal functions
exported, see ``EXPORTS``), runs its static constructors and ``qjs_init_argv``
with the bootstrap as the entry module, then writes the instance's linear
memory and stack pointer back into the module (``_wasm_image.snapshot``).

A run of the image must not call ``_initialize`` or ``qjs_init_argv`` again:
it evaluates ``__almanacRun(jobJson)`` with ``JS_Eval`` and drives the
returned promise with ``js_std_await`` (see ``runtime.Sandbox``).

What the snapshot holds is the same for every tenant and every run: no
script, no job, no secret.  The one piece of state that must differ between
runs, Math.random's, is reseeded by each run (see ``bootstrap.js``).
"""

from __future__ import annotations

import struct
import time

import wasmtime

from . import _native, _wasi, _wasm_image

# Export name -> the internal function's name (from the module's name section).
INTERNAL = {
    "almanac_eval": "JS_Eval",  # (ctx, input, input_len, filename, flags) -> JSValue
    "almanac_await": "js_std_await",  # (ctx, JSValue) -> JSValue: runs jobs and timers until settled
    "almanac_set_memory_limit": "JS_SetMemoryLimit",  # (rt, limit)
    "almanac_runtime": "JS_GetRuntime",  # (ctx) -> rt
}
STACK_POINTER = 0  # global 0 is the C shadow stack pointer (wasi-sdk's layout)
STACK_POINTER_EXPORT = "almanac_stack_pointer"

# The exports a run calls without type checks (``_native.call``).
EXPORTS = {
    "malloc": (["i32"], ["i32"]),
    "qjs_get_context": ([], ["i32"]),
    "almanac_eval": (["i32", "i32", "i32", "i32", "i32"], ["i64"]),
    "almanac_await": (["i32", "i64"], ["i64"]),
    "almanac_set_memory_limit": (["i32", "i32"], []),
    "almanac_runtime": (["i32"], ["i32"]),
}
_INIT_EXPORTS = {"_initialize": ([], []), "qjs_init_argv": (["i32", "i32"], ["i32"])}
SETUP_SECONDS = 30  # far more than the bootstrap needs; it only guards a broken build


class SnapshotError(RuntimeError):
    """The bootstrap did not initialise cleanly: no image can be made."""


def with_exports(wasm: bytes) -> bytes:
    """The QuickJS module with the internal functions a run calls exported."""
    return _wasm_image.add_exports(wasm, INTERNAL, {STACK_POINTER_EXPORT: STACK_POINTER})


def take(wasm: bytes, bootstrap: bytes) -> bytes:
    """The image: ``wasm`` (from ``with_exports``) after evaluating ``bootstrap``.

    The module runs once here, on our own bootstrap, so it is compiled without
    optimisation or epoch checks: that saves ~0.6 s of a first start.
    """
    config = wasmtime.Config()
    config.cranelift_opt_level = "none"
    engine = wasmtime.Engine(config)
    linker = wasmtime.Linker(engine)
    _wasi.define(linker)
    module = wasmtime.Module(engine, wasm)
    _native.check_exports(module, {**EXPORTS, **_INIT_EXPORTS})
    io = _wasi.RunIO(b"", time.monotonic() + SETUP_SECONDS, 64 * 1024, _no_requests)
    store = wasmtime.Store(engine)
    _wasi.bind(io)
    try:
        instance = linker.instantiate(store, module)
        io.memory = _native.Memory(_native.export(store, instance, "memory").of.memory)
        _native.call(store, _native.export(store, instance, "_initialize"))
        argv = [b"qjs", b"-m", b"-e", bootstrap]
        argc, argv_ptr = write_argv(store, instance, io.memory, argv)
        status = _native.call(store, _native.export(store, instance, "qjs_init_argv"), argc, argv_ptr)
        if status != 0 or io.logs:
            raise SnapshotError(f"the bootstrap failed ({status}): {io.logs.decode(errors='replace')}")
        io.memory.refresh(_native.context(store))
        memory = io.memory.read(0, io.memory.size)
        stack_pointer = instance.exports(store)[STACK_POINTER_EXPORT].value(store)
    finally:
        _wasi.bind(None)
        store.close()
    return _wasm_image.snapshot(wasm, memory, {STACK_POINTER: stack_pointer & 0xFFFFFFFF})


def write_argv(store: wasmtime.Store, instance: wasmtime.Instance, memory: _native.Memory,
               argv: list[bytes]) -> tuple[int, int]:
    """Copy argv into guest memory as a C ``char **`` (one malloc for all)."""
    blob = b"".join(a + b"\0" for a in argv)
    table = 4 * len(argv)
    base = _native.call(store, _native.export(store, instance, "malloc"), table + len(blob))
    if base == 0:
        raise MemoryError("the guest could not allocate its arguments")
    pointers, offset = [], base + table
    for arg in argv:
        pointers.append(offset)
        offset += len(arg) + 1
    memory.refresh(_native.context(store))
    memory.write(base, struct.pack(f"<{len(argv)}I", *pointers) + blob)
    return len(argv), base


def _no_requests(_line: bytes) -> bytes:
    raise SnapshotError("the bootstrap made a host call while the snapshot was taken")
