"""Build the image every run starts from: QuickJS initialised, the bootstrap evaluated.

``take`` instantiates our reactor (``reactor/almanac_qjs.c``), runs its static
constructors (``_initialize``) and ``almanac_init`` with the bootstrap, then
writes the instance's linear memory and stack pointer back into the module
(``_wasm_image.snapshot``).

A run of the image must not call ``_initialize`` or ``almanac_init`` again: it
calls ``almanac_run`` (see ``runtime.Sandbox``).

What the snapshot holds is the same for every tenant and every run: no
script, no job, no secret.  The one piece of state that must differ between
runs, Math.random's, is reseeded by each run (see ``bootstrap.js``).
"""

from __future__ import annotations

import time

import wasmtime

from . import _native, _wasi, _wasm_image

STACK_POINTER = 0  # global 0 is the C shadow stack pointer (wasm-ld's layout)
STACK_POINTER_EXPORT = "almanac_stack_pointer"
MAX_STACK = 1024 * 1024  # QuickJS's own stack check, well inside the 2 MB shadow stack

# The exports a run calls without type checks (``_native.call``).
EXPORTS = {
    "almanac_alloc": (["i32"], ["i32"]),
    "almanac_buffer": ([], ["i32"]),
    "almanac_buffer_size": ([], ["i32"]),
    "almanac_run": (["i32", "i32", "i32", "i32", "i32"], []),
}
_INIT_EXPORTS = {"_initialize": ([], []), "almanac_init": (["i32", "i32", "i32"], ["i32"])}
SETUP_SECONDS = 30  # far more than the bootstrap needs; it only guards a broken build


class SnapshotError(RuntimeError):
    """The bootstrap did not initialise cleanly: no image can be made."""


def with_exports(wasm: bytes) -> bytes:
    """The reactor with its stack pointer exported, so the snapshot can read it."""
    return _wasm_image.add_exports(wasm, {}, {STACK_POINTER_EXPORT: STACK_POINTER})


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
    io = _wasi.RunIO(time.monotonic() + SETUP_SECONDS, 64 * 1024, 0, 0, _no_requests)
    store = wasmtime.Store(engine)
    _wasi.bind(io)
    try:
        instance = linker.instantiate(store, module)
        io.memory = _native.Memory(_native.memory_export(store, instance))
        _native.call(store, _native.export(store, instance, "_initialize"))
        code = bootstrap + b"\0"
        buffer = _native.call(store, _native.export(store, instance, "almanac_alloc"), len(code))
        if buffer == 0:
            raise MemoryError("the guest could not allocate the bootstrap")
        io.memory.refresh(_native.context(store))
        io.memory.write(buffer, code)
        status = _native.call(store, _native.export(store, instance, "almanac_init"), buffer, len(bootstrap),
                              MAX_STACK)
        if status != 0 or io.logs or io.finished:
            detail = io.finished[1].decode(errors="replace") if io.finished else io.logs.decode(errors="replace")
            raise SnapshotError(f"the bootstrap failed ({status}): {detail}")
        io.memory.refresh(_native.context(store))
        memory = io.memory.read(0, io.memory.size)
        stack_pointer = _native.global_value(store, instance, STACK_POINTER_EXPORT)
    finally:
        _wasi.bind(None)
        store.close()
    return _wasm_image.snapshot(wasm, memory, {STACK_POINTER: stack_pointer & 0xFFFFFFFF})


def _no_requests(_request: bytes) -> bytes:
    raise SnapshotError("the bootstrap made a host call while the snapshot was taken")
