"""The hot path of a run, straight on wasmtime's C API through ctypes.

wasmtime-py's generic layers cost more than the work they wrap on every run:
its host-function trampoline builds a ``Caller``, a ``Val`` per argument and
compares ``ValType`` objects to convert the result (tens of microseconds per
WASI call, with the GIL held), ``Func.__call__`` rebuilds the function's type
on every call and ``Instance.exports`` wraps every export.  Here:

* imports are defined with ``wasmtime_linker_define_func_unchecked``: the
  callback gets the raw argument array's address and unpacks it with one
  precompiled ``struct.Struct``; the result is written back in place; a Python
  exception becomes a trap made here (wasmtime-py's process-global "last
  exception" is never involved);
* guest memory is read and written with ``string_at``/``memmove`` at the
  memory's base address, fetched from the caller on each host call together
  with the memory's current size, and every access is bounds-checked against
  that size (``Fault`` when it is outside);
* exports are looked up by name, and called with
  ``wasmtime_func_call_unchecked`` after their signatures were checked once
  (``check_exports``).

Nothing here is kept across runs but the function definitions.

This is the only module that touches wasmtime-py's internals (``wasmtime._ffi``,
``Store._context()``, ``Instance._instance``, ``Extern.of``, ``_from_ptr``).
They change between releases, so it runs only on the exact version it was
written against (``WASMTIME``, pinned with ``==`` in pyproject.toml): any
other version fails here, at import, saying which one is expected.
"""

from __future__ import annotations

import ctypes
import struct
from ctypes import c_size_t, c_void_p
from importlib import metadata
from typing import Callable, cast

WASMTIME = "50.0.1"  # the wasmtime-py release these internals were checked against


class WasmtimeVersionError(ImportError):
    """The installed wasmtime-py is not the one ``_native`` was written against."""


def check_version(found: str | None) -> None:
    if found != WASMTIME:
        raise WasmtimeVersionError(
            f"almanac's sandbox needs wasmtime=={WASMTIME} (found {found or 'none'}): it calls "
            f"wasmtime-py internals that change between releases; install the pinned version "
            f"(pip install 'wasmtime=={WASMTIME}')")


_found: str | None
try:
    _found = metadata.version("wasmtime")
except metadata.PackageNotFoundError:
    _found = None
check_version(_found)

import wasmtime  # noqa: E402  (only once the version is known to fit)
from wasmtime import _ffi as ffi  # noqa: E402

TABLE_KEEP_RESIDENT = 64 * 1024  # bytes of a table slot reset in place (the whole of ours)
RAW = ctypes.sizeof(ffi.wasmtime_val_raw_t)  # 16: every raw argument slot


class Fault(Exception):
    """The guest handed the host a pointer outside its linear memory."""


def _proto(name: str, restype, *argtypes):
    # A private function object: setting argtypes on ``ffi.dll.name`` would
    # change the one wasmtime-py itself calls.
    fn = ffi.dll[name]
    fn.restype, fn.argtypes = restype, list(argtypes)
    return fn


_caller_context = _proto("wasmtime_caller_context", c_void_p, c_void_p)
_memory_data = _proto("wasmtime_memory_data", c_void_p, c_void_p, c_void_p)
_memory_data_size = _proto("wasmtime_memory_data_size", c_size_t, c_void_p, c_void_p)
_trap_new = _proto("wasmtime_trap_new", c_void_p, ctypes.c_char_p, c_size_t)
_error_new = _proto("wasmtime_error_new", c_void_p, ctypes.c_char_p)
_Callback = ctypes.CFUNCTYPE(c_size_t, c_void_p, c_void_p, c_void_p, c_size_t)
# (context, data, *epoch_deadline_delta, *update_kind) -> wasmtime_error_t* or NULL
_EpochCallback = ctypes.CFUNCTYPE(c_size_t, c_void_p, c_void_p, ctypes.POINTER(ctypes.c_uint64),
                                  ctypes.POINTER(ctypes.c_uint8))
_set_epoch_callback = _proto("wasmtime_store_epoch_deadline_callback", None, c_void_p, _EpochCallback,
                             c_void_p, c_void_p)
UPDATE_DEADLINE_CONTINUE = 0
_Finalizer = ctypes.CFUNCTYPE(None, c_void_p)
_string_at, _memmove = ctypes.string_at, ctypes.memmove
_I32 = ctypes.c_int32


class Memory:
    """One run's view of the guest's linear memory (``memory`` export)."""

    __slots__ = ("raw", "addr", "base", "size")

    def __init__(self, raw: ffi.wasmtime_memory_t) -> None:
        self.raw = raw  # keeps the struct alive; addr points into it
        self.addr = ctypes.addressof(raw)
        self.base = 0
        self.size = 0

    def refresh(self, context: int) -> None:
        """Re-read base and size: the guest may have grown memory since."""
        self.base = _memory_data(context, self.addr)
        self.size = _memory_data_size(context, self.addr)

    def read(self, ptr: int, length: int) -> bytes:
        if ptr + length > self.size:
            raise Fault(f"read of {length} bytes at {ptr}")
        return _string_at(self.base + ptr, length)

    def write(self, ptr: int, data: bytes) -> None:
        if ptr + len(data) > self.size:
            raise Fault(f"write of {len(data)} bytes at {ptr}")
        _memmove(self.base + ptr, data, len(data))


_keep: list = []  # callbacks must outlive the linker (and every instance): module-lifetime


@_Finalizer
def _no_finalizer(_data: int) -> None:
    pass


def define(linker: wasmtime.Linker, module: str, name: str, params: str, has_result: bool,
           func: Callable, current: Callable[[], object],
           on_error: Callable[[BaseException], bytes]) -> None:
    """Define ``module.name`` as ``func(run, *params)`` (``params``: "i" u32, "I" i64).

    ``run = current()`` is the calling thread's run; before each call its
    ``memory`` (a ``Memory`` or None) is refreshed from the caller.  An
    exception in ``func`` becomes a trap whose message is ``on_error(exc)``.
    """
    fmt = "<" + "".join("I12x" if p == "i" else "q8x" for p in params)
    unpack, size = struct.Struct(fmt).unpack, RAW * len(params)

    def callback(_env: int, caller: int, args: int, _nargs: int) -> int:
        try:
            run = current()
            memory = run.memory
            if memory is not None:
                memory.refresh(_caller_context(caller))
            result = func(run, *unpack(_string_at(args, size)))
            if has_result:
                _I32.from_address(args).value = result
            return 0
        except BaseException as exc:  # a ctypes callback must not raise
            message = on_error(exc)
            return _trap_new(message, len(message))

    raw = _Callback(callback)
    _keep.append(raw)
    ty = wasmtime.FuncType([wasmtime.ValType.i64() if p == "I" else wasmtime.ValType.i32()
                            for p in params], [wasmtime.ValType.i32()] if has_result else [])
    module_b, name_b = module.encode(), name.encode()
    error = ffi.wasmtime_linker_define_func_unchecked(
        linker.ptr(), module_b, len(module_b), name_b, len(name_b), ty.ptr(),
        ctypes.cast(raw, ffi.wasmtime_func_unchecked_callback_t), None,
        ctypes.cast(_no_finalizer, ctypes.CFUNCTYPE(None, c_void_p)))
    if error:
        raise wasmtime.WasmtimeError._from_ptr(error)


def epoch_callback(stop_reason: Callable[[], str | None]) -> _EpochCallback:
    """A store's epoch-deadline callback: ``stop_reason()`` is None to let the guest go on
    until the epoch moves once more, or a message to stop it (an error, so a trap)."""

    def callback(_context: int, _data: int, delta: object, kind: object) -> int:
        try:
            reason = stop_reason()
        except BaseException as exc:  # a ctypes callback must not raise: stop the guest instead
            reason = f"deadline check failed: {type(exc).__name__}"
        if reason is None:
            delta[0] = 1
            kind[0] = UPDATE_DEADLINE_CONTINUE
            return 0
        return _error_new(reason.encode())

    raw = _EpochCallback(callback)
    _keep.append(raw)
    return raw


# --- calling into the instance -------------------------------------------------

def pooling(config: wasmtime.Config, instances: int, max_memory: int) -> None:
    """Instances in preallocated, reused slots (see ``_engine._config``)."""
    pool = ffi.wasmtime_pooling_allocation_config_new()
    try:
        ffi.wasmtime_pooling_allocation_config_total_core_instances_set(pool, instances)
        ffi.wasmtime_pooling_allocation_config_total_memories_set(pool, instances)
        ffi.wasmtime_pooling_allocation_config_total_tables_set(pool, instances)
        ffi.wasmtime_pooling_allocation_config_max_memory_size_set(pool, max_memory)
        ffi.wasmtime_pooling_allocation_config_max_core_instance_size_set(pool, 1 << 20)
        ffi.wasmtime_pooling_allocation_config_table_elements_set(pool, 1 << 16)
        # The function table (~520 entries) is reset with memset, not madvise: one syscall
        # and two page faults fewer per run (linear memory stays madvise'd: see _engine._pooling).
        ffi.wasmtime_pooling_allocation_config_table_keep_resident_set(pool, TABLE_KEEP_RESIDENT)
        ffi.wasmtime_pooling_allocation_strategy_set(config.ptr(), pool)
    finally:
        ffi.wasmtime_pooling_allocation_config_delete(pool)


def memory_export(store: wasmtime.Store, instance: wasmtime.Instance) -> ffi.wasmtime_memory_t:
    """The instance's ``memory`` export, for ``Memory``."""
    return export(store, instance, "memory").of.memory


def global_value(store: wasmtime.Store, instance: wasmtime.Instance, name: str) -> int:
    # wasmtime's stubs give exports as the whole Extern union; the caller names a global
    return cast(wasmtime.Global, instance.exports(store)[name]).value(store)


def export(store: wasmtime.Store, instance: wasmtime.Instance, name: str) -> ffi.wasmtime_extern_t:
    item = ffi.wasmtime_extern_t()
    name_b = name.encode()
    if not ffi.wasmtime_instance_export_get(store._context(), ctypes.byref(instance._instance),
                                            name_b, len(name_b), ctypes.byref(item)):
        raise KeyError(name)
    return item


def check_exports(module: wasmtime.Module, expected: dict[str, tuple[list[str], list[str]]]) -> None:
    """``call`` does not check types: make sure once that the module's match."""
    found = {e.name: e.type for e in module.exports}
    for name, (params, results) in expected.items():
        ty = found.get(name)
        if not isinstance(ty, wasmtime.FuncType) or [str(p) for p in ty.params] != params \
                or [str(r) for r in ty.results] != results:
            raise RuntimeError(f"the QuickJS module's export {name} has an unexpected type")


def call(store: wasmtime.Store, func: ffi.wasmtime_extern_t, *args: int, wide: str = "") -> int:
    """Call an export whose type ``check_exports`` vouched for.

    Arguments and the result are i32, except where ``wide`` (one letter per
    argument, then one for the result) says ``I``: those are i64.
    """
    slots = (ffi.wasmtime_val_raw_t * max(len(args), 1))()
    for i, value in enumerate(args):
        if wide[i:i + 1] == "I":
            slots[i].i64 = value
        else:
            slots[i].i32 = value
    trap = ctypes.POINTER(ffi.wasm_trap_t)()
    error = ffi.wasmtime_func_call_unchecked(store._context(), ctypes.byref(func.of.func), slots,
                                             len(slots), ctypes.byref(trap))
    if error:
        raise wasmtime.WasmtimeError._from_ptr(error)
    if trap:
        raise wasmtime.Trap._from_ptr(trap)
    return slots[0].i64 if wide[len(args):] == "I" else slots[0].i32


def context(store: wasmtime.Store) -> int:
    return ctypes.cast(store._context(), c_void_p).value


def memory_size(store: wasmtime.Store, memory: Memory) -> int:
    return _memory_data_size(context(store), memory.addr)


# --- one run's store and instance, without wasmtime-py objects ------------------
#
# A run used to build a ``wasmtime.Store`` (a finalizer, an engine check, a
# context wrapper), an ``Instance`` through ``InstancePre.instantiate`` (a
# trap holder, ``enter_wasm``) and ``wasmtime_extern_t`` structs per export:
# about 40 us of Python per trivial run.  ``RunStore`` makes the same C calls
# with plain-int arguments on private prototypes.

_store_new = _proto("wasmtime_store_new", c_void_p, c_void_p, c_void_p, c_void_p)
_store_context = _proto("wasmtime_store_context", c_void_p, c_void_p)
_store_delete = _proto("wasmtime_store_delete", None, c_void_p)
_store_limiter = _proto("wasmtime_store_limiter", None, c_void_p, ctypes.c_int64, ctypes.c_int64,
                        ctypes.c_int64, ctypes.c_int64, ctypes.c_int64)
_set_epoch_deadline = _proto("wasmtime_context_set_epoch_deadline", None, c_void_p, ctypes.c_uint64)
_pre_instantiate = _proto("wasmtime_instance_pre_instantiate", c_void_p, c_void_p, c_void_p, c_void_p, c_void_p)
_export_get = _proto("wasmtime_instance_export_get", ctypes.c_bool, c_void_p, c_void_p, ctypes.c_char_p,
                     c_size_t, c_void_p)
_call_unchecked = _proto("wasmtime_func_call_unchecked", c_void_p, c_void_p, c_void_p, c_void_p, c_size_t,
                         c_void_p)
_NO_LIMIT = -1
_ARGS = ffi.wasmtime_val_raw_t * 5  # the most any export of ``_snapshot.EXPORTS`` takes


def _raise_for(error: int | None, trap: ctypes.c_void_p) -> None:
    if error:
        raise wasmtime.WasmtimeError._from_ptr(ctypes.cast(error, ctypes.POINTER(ffi.wasmtime_error_t)))
    if trap.value:
        raise wasmtime.Trap._from_ptr(ctypes.cast(trap.value, ctypes.POINTER(ffi.wasm_trap_t)))


class RunStore:
    """One run's Store, with at most one instance of the image; ``close`` drops both (and frees the slot)."""

    __slots__ = ("ptr", "context", "instance", "memory", "_args", "_trap", "_func")

    def __init__(self, engine: wasmtime.Engine, memory_cap: int) -> None:
        self.ptr = _store_new(ctypes.cast(engine.ptr(), c_void_p), None, None)
        self.context = _store_context(self.ptr)
        _store_limiter(self.ptr, memory_cap, _NO_LIMIT, _NO_LIMIT, _NO_LIMIT, _NO_LIMIT)
        self.instance = ffi.wasmtime_instance_t()
        self.memory: Memory | None = None
        self._args = _ARGS()
        self._trap = c_void_p()
        self._func = ffi.wasmtime_extern_t()

    def on_epoch_deadline(self, callback: Callable[..., int]) -> None:
        """Call ``callback`` (from ``epoch_callback``) whenever the store reaches its epoch deadline."""
        _set_epoch_callback(self.ptr, callback, None, None)

    def arm(self) -> None:
        """Reach the epoch deadline at the engine's next epoch."""
        _set_epoch_deadline(self.context, 1)

    def instantiate(self, pre: wasmtime.InstancePre) -> Memory:
        """Instantiate ``pre`` (the image) in this store; its memory, refreshed."""
        error = _pre_instantiate(ctypes.cast(pre.ptr(), c_void_p), self.context,
                                 ctypes.addressof(self.instance), ctypes.addressof(self._trap))
        _raise_for(error, self._trap)
        memory = ffi.wasmtime_extern_t()
        self._export(b"memory", memory)
        self.memory = Memory(memory.of.memory)
        self.memory.refresh(self.context)
        return self.memory

    def call(self, name: bytes, *args: int) -> int:
        """Call the export ``name`` (i32 arguments, i32 or no result) that ``check_exports`` vouched for."""
        self._export(name, self._func)
        slots = self._args
        for i, value in enumerate(args):
            slots[i].i32 = value
        error = _call_unchecked(self.context, ctypes.addressof(self._func.of.func), slots, len(args) or 1,
                                ctypes.addressof(self._trap))
        _raise_for(error, self._trap)
        return slots[0].i32

    def memory_size(self) -> int:
        return _memory_data_size(self.context, self.memory.addr) if self.memory is not None else 0

    def close(self) -> None:
        if self.ptr:
            _store_delete(self.ptr)
            self.ptr = self.context = None

    def _export(self, name: bytes, into: ffi.wasmtime_extern_t) -> None:
        if not _export_get(self.context, ctypes.addressof(self.instance), name, len(name), ctypes.addressof(into)):
            raise KeyError(name)
