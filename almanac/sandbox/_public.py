"""The fallback: one run on wasmtime-py's public API only, for when ``_native`` cannot be used.

Nothing here reaches into wasmtime-py's internals (no ``_ffi``, no
``_context()``, no raw callbacks): imports are ``Linker.define_func`` with a
``Caller``, guest memory is ``Memory.read``/``write``, exports are called as
``Func``.  What the public API lacks costs precision, not safety:

* no epoch-deadline callback: a ticker thread moves the epoch every
  ``TICK_MS`` and each store traps after its timeout's worth of ticks (up to
  one tick late), instead of being stopped exactly at its deadline;
* no pooling allocator: every run maps and unmaps its linear memory;
* the snapshot is still taken by ``_snapshot`` (a one-off at start), and
  ``_wasi`` still registers through ``_native``: to run with ``_native``
  refused, those two would move onto this module's ``define_func`` path.

``bench/sandbox_bench.py`` measures its CPU per run beside the native path's.
It is not wired into ``Sandbox``: it is the measured way out if a wasmtime
release breaks ``_native`` before it can be re-checked.
"""

from __future__ import annotations

import threading
import time
from typing import Any, cast

import wasmtime

from . import _engine, _snapshot, _wasi
from ._native import Fault  # the class only; _wasi needs _native for now (see the docstring)
from ._bridge import Bridge
from .capabilities import Capabilities, request_cap
from .limits import MIB, Limits
from .contract import RunResult
from .runtime import REQUEST_OVERHEAD, STATIC_MEMORY, _job_json, _outcome, with_effects

TICK_MS = 10


class _Memory:
    """``_native.Memory``'s read/write on the public API, through the calling ``Caller``."""

    def __init__(self, memory: wasmtime.Memory, store: Any) -> None:
        self.memory, self.store = memory, store

    def read(self, ptr: int, length: int) -> bytes:
        if ptr + length > self.memory.data_len(self.store):
            raise Fault(f"read of {length} bytes at {ptr}")
        return bytes(self.memory.read(self.store, ptr, ptr + length))

    def write(self, ptr: int, data: bytes) -> None:
        if ptr + len(data) > self.memory.data_len(self.store):
            raise Fault(f"write of {len(data)} bytes at {ptr}")
        self.memory.write(self.store, data, ptr)


def _import(func: Any, params: str, has_result: bool) -> tuple[wasmtime.FuncType, Any]:
    types = [wasmtime.ValType.i64() if p == "I" else wasmtime.ValType.i32() for p in params]
    ty = wasmtime.FuncType(types, [wasmtime.ValType.i32()] if has_result else [])

    def callback(caller: wasmtime.Caller, *args: int) -> int | None:
        io = _wasi.current()
        # run() binds the run and its _Memory before the guest can call an import
        assert io is not None and isinstance(io.memory, _Memory)
        io.memory.store = caller  # memory access goes through the calling instance
        unsigned = [a & 0xFFFFFFFF if p == "i" else a for a, p in zip(args, params)]
        return func(io, *unsigned)

    return ty, callback


class PublicSandbox:
    """``Sandbox.run`` on the public API; see the module's docstring for what it gives up."""

    def __init__(self) -> None:
        config = wasmtime.Config()
        config.epoch_interruption = True
        config.max_wasm_stack = _engine.MAX_WASM_STACK
        config.cranelift_opt_level = "speed"
        self.engine = wasmtime.Engine(config)
        wasm = _snapshot.with_exports(_engine.wasm_path().read_bytes())
        self.module = wasmtime.Module(self.engine, _snapshot.take(wasm, _engine.load_bootstrap()))
        self.linker = wasmtime.Linker(self.engine)
        for (module, name), (func, params, has_result) in _wasi.IMPORTS.items():
            ty, callback = _import(func, params, has_result)
            self.linker.define_func(module, name, ty, callback, access_caller=True)
        self._stop = threading.Event()
        self._ticker = threading.Thread(target=self._tick, daemon=True, name="almanac-sandbox-ticker")
        self._ticker.start()

    def _tick(self) -> None:
        while not self._stop.wait(TICK_MS / 1000):
            self.engine.increment_epoch()

    def close(self) -> None:
        self._stop.set()

    def run(self, source: str, event: dict, limits: Limits, caps: Capabilities) -> RunResult:
        started = time.monotonic()
        bridge = Bridge(caps, limits)
        io = _wasi.RunIO(started + limits.timeout_ms / 1000, limits.log_bytes, limits.output_bytes,
                         request_cap(limits.kv_value_bytes, REQUEST_OVERHEAD), bridge.handle)
        job = _job_json({"mode": "run", "event": event, "logBytes": limits.log_bytes})
        script = source.encode("utf-8", "surrogatepass")
        store = wasmtime.Store(self.engine)
        store.set_limits(memory_size=limits.memory_mb * MIB + STATIC_MEMORY)
        store.set_epoch_deadline(limits.timeout_ms // TICK_MS + 1)
        _wasi.bind(io)
        trap: Exception | None = None
        image, grown = 0, 0
        memory: wasmtime.Memory | None = None
        try:
            instance = self.linker.instantiate(store, self.module)
            exports = instance.exports(store)
            # wasmtime's stubs give every export as the whole Extern union; these are the module's
            memory = cast(wasmtime.Memory, exports["memory"])
            image = memory.data_len(store)
            guest = io.memory = _Memory(memory, store)
            buffer = cast(wasmtime.Func, exports["almanac_alloc"])(store, len(job) + len(script) + 1)
            guest.store = store
            guest.write(buffer, job + script + b"\0")
            cast(wasmtime.Func, exports["almanac_run"])(store, buffer, len(job), buffer + len(job), len(script),
                                                        limits.memory_mb * MIB)
        except Exception as exc:  # traps, wasmtime errors
            trap = exc
            if isinstance(exc, wasmtime.Trap) and exc.trap_code == wasmtime.TrapCode.INTERRUPT:
                io.exit_reason = "timed_out"
        finally:
            _wasi.bind(None)
            if memory is not None:
                grown = memory.data_len(store) - image
        return with_effects(_outcome(io, trap, grown, limits, started), bridge)
