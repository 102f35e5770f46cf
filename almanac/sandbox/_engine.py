"""One wasmtime Engine, one compiled QuickJS module and one deadline watcher per process.

The module every run instantiates is QuickJS already initialised with the
bootstrap evaluated (``_snapshot``).  Making it and compiling it take a couple
of seconds, so that is done once per process (and, given a cache dir, once per
machine: the compiled image is serialized to disk).  Every run then only
instantiates it from a shared ``InstancePre`` into a fresh ``Store``.

Deadlines use epoch interruption: a daemon thread (``_Deadlines``) moves the
engine's epoch when a run's deadline passes, and the run's store then stops it.
The check is compiled into loop back-edges and function entries,
so it cannot be caught by JavaScript and stops regex backtracking and native
QuickJS loops as well as script loops.
"""

from __future__ import annotations

import hashlib
import logging
import math
import os
import tempfile
import threading
import time
from importlib import metadata, resources
from pathlib import Path

import wasmtime

from . import _native, _snapshot, _wasi
from .limits import MIB

log = logging.getLogger("almanac.sandbox")

MAX_WASM_STACK = 1024 * 1024  # well under any Python thread's native stack
MAX_INSTANCES = 64  # concurrent runs per process (pooling allocator slots)
MAX_MEMORY = 272 * MIB  # a slot's linear memory: over Limits' largest cap (256 MB + static)


def wasm_path() -> Path:
    """Our QuickJS-NG reactor (package data; rebuilt by ``make sandbox-wasm``, see ``reactor/``)."""
    return Path(str(resources.files(__package__).joinpath("almanac-qjs.wasm")))


IMAGE_VERSION = 2  # bump when what ``_snapshot.take`` writes changes


def load_bootstrap() -> bytes:
    text = resources.files(__package__).joinpath("bootstrap.js").read_text("utf-8")
    # Comment-only lines cost parse time; drop them.
    return "\n".join(l for l in text.splitlines() if not l.lstrip().startswith("//")).encode()


def _config(pooling: bool) -> wasmtime.Config:
    config = wasmtime.Config()
    config.epoch_interruption = True
    config.max_wasm_stack = MAX_WASM_STACK
    config.cranelift_opt_level = "speed"
    if pooling:
        _pooling(config)
    return config


def _pooling(config: wasmtime.Config) -> None:
    """Instances in preallocated, reused slots instead of fresh mappings per run.

    The on-demand allocator maps (and unmaps) a multi-GiB reservation for
    every run's linear memory; a reused slot is only reset (copy-on-write
    image, madvise).  Measured: ~0.1 ms less kernel CPU per trivial run.
    ``MAX_INSTANCES`` bounds concurrent instances per process; ``Sandbox``
    waits for a slot (``Shared.slots``) rather than fail a run.

    Linear memory is reset with madvise (a trivial run then faults ~48 pages
    back in, ~0.13 ms of kernel time), not kept resident: wasmtime's C API
    cannot turn on its PAGEMAP_SCAN reset, and without it keeping memory
    resident means a memset/memcpy of the whole prefix up to the heap (the
    2 MB C stack comes first), which measured as costly as the faults.
    """
    _native.pooling(config, MAX_INSTANCES, MAX_MEMORY)


class _Deadlines(threading.Thread):
    """Interrupts runs that pass their deadline; asleep, costing nothing, while none is due.

    Epoch interruption moved only when needed, instead of a steady tick: each
    run's store is armed to reach its epoch deadline at the engine's next epoch
    (``begin``), and this thread increments the epoch once the earliest
    deadline among the runs it was told of has passed.  Every store then calls
    ``_stop_reason`` at its next loop back-edge or function entry: a run past
    its own deadline is stopped there, the others are let on until the epoch
    moves again.  A run that ends in time, nearly every run, costs no wake-up.
    (A steady 5 ms tick cost a trivial run about a quarter of its CPU on 2
    cores: the thread's wake-ups, GIL hand-offs, and TLB shootdowns sent to
    the core it woke on when the run's memory was reset.)

    After the last run ends the thread wakes once more, at the deadline it was
    sleeping towards, and then sleeps until a run begins, so back-to-back runs
    do not wake it each time and an idle process is not woken at all.
    """

    def __init__(self, engine: wasmtime.Engine) -> None:
        super().__init__(name="almanac-sandbox-deadlines", daemon=True)
        self.engine = engine
        self.cond = threading.Condition(threading.Lock())
        self.waiting: dict[int, float] = {}  # run token -> deadline (monotonic), until the epoch moved past it
        self.tokens = 0
        self.wake_at = math.inf  # when the thread looks next (inf: asleep until a run begins)
        self.moves = 0  # how often the epoch was moved
        self.stopped = False

    def begin(self, store: _native.RunStore, deadline: float) -> int:
        """Arm ``store`` and watch ``deadline`` (time.monotonic()); a token for ``end``."""
        store.on_epoch_deadline(STOP_REASON)
        with self.cond:  # the epoch cannot move between arming and watching
            store.arm()
            self.tokens += 1
            self.waiting[self.tokens] = deadline
            if deadline < self.wake_at:
                self.wake_at = deadline
                self.cond.notify()
            return self.tokens

    def end(self, token: int) -> None:
        with self.cond:
            self.waiting.pop(token, None)

    def stop(self) -> None:
        with self.cond:
            self.stopped = True
            self.cond.notify()

    def run(self) -> None:
        with self.cond:
            while not self.stopped:
                now = time.monotonic()
                due = [token for token, deadline in self.waiting.items() if deadline <= now]
                if due:
                    self.engine.increment_epoch()
                    self.moves += 1
                    for token in due:
                        del self.waiting[token]
                if self.waiting:
                    self.wake_at = min(self.waiting.values())
                elif self.wake_at <= now:
                    self.wake_at = math.inf
                self.cond.wait(None if self.wake_at == math.inf else self.wake_at - now)


def _stop_reason() -> str | None:
    """(A store reached its epoch deadline.) Why its run must stop now, or None to go on."""
    io = _wasi.current()
    if io is None:
        return "host exit: no run"
    if time.monotonic() < io.deadline:
        return None
    io.exit_reason = "timed_out"
    return "host exit: timed_out"


STOP_REASON = _native.epoch_callback(_stop_reason)


class Shared:
    """Process-wide engine state, reference-counted by open Sandboxes."""

    def __init__(self, cache_dir: Path | None) -> None:
        try:
            self._build(cache_dir, pooling=True)
            self.slots = threading.BoundedSemaphore(MAX_INSTANCES)
        except Exception:  # e.g. no room for the slots' address space: fresh mappings per run
            log.warning("sandbox.pooling_unavailable", exc_info=True)
            self._build(cache_dir, pooling=False)
            self.slots = threading.BoundedSemaphore(1 << 30)
        self.users = 0
        self.deadlines: _Deadlines | None = None

    def _build(self, cache_dir: Path | None, pooling: bool) -> None:
        self.engine = wasmtime.Engine(_config(pooling))
        linker = wasmtime.Linker(self.engine)
        _wasi.define(linker)
        self.module = _load_image(self.engine, cache_dir, pooling)
        _native.check_exports(self.module, _snapshot.EXPORTS)
        self.pre = linker.instantiate_pre(self.module)
        probe = wasmtime.Store(self.engine)  # a module the slots cannot hold fails here, not in a run
        probe.set_epoch_deadline(1 << 40)  # two field reads; the epoch does not move yet
        try:
            instance = self.pre.instantiate(probe)
            # Where a run's job and script go when they fit: fixed by the image, the same in every run.
            self.buffer = _native.call(probe, _native.export(probe, instance, "almanac_buffer"))
            self.buffer_size = _native.call(probe, _native.export(probe, instance, "almanac_buffer_size"))
            self.image_memory = _native.memory_size(probe, _native.Memory(_native.memory_export(probe, instance)))
        finally:
            probe.close()


_lock = threading.Lock()
_shared: Shared | None = None


def acquire(cache_dir: Path | None) -> Shared:
    global _shared
    with _lock:
        if _shared is None:
            _shared = Shared(cache_dir)
        shared = _shared
        shared.users += 1
        if shared.deadlines is None:
            shared.deadlines = _Deadlines(shared.engine)
            shared.deadlines.start()
        return shared


def release(shared: Shared) -> None:
    with _lock:
        shared.users -= 1
        if shared.users == 0 and shared.deadlines is not None:
            shared.deadlines.stop()
            shared.deadlines = None


def _cache_key(wasm: bytes, bootstrap: bytes, pooling: bool = True) -> str:
    # The artifact is only valid for this wasmtime build, these settings and this bootstrap.
    version = metadata.version("wasmtime")
    settings = (f"{version}|{MAX_WASM_STACK}|epoch|speed|{'pool' if pooling else 'ondemand'}"
                f"|image{IMAGE_VERSION}").encode()
    return hashlib.sha256(wasm + b"\0" + bootstrap + b"\0" + settings).hexdigest()[:32]


def cached_image(cache_dir: Path, pooling: bool = True) -> Path:
    """Where the compiled image for this build lives in ``cache_dir``."""
    key = _cache_key(wasm_path().read_bytes(), load_bootstrap(), pooling)
    return Path(cache_dir) / f"qjs-image-{key}.cwasm"


def _load_image(engine: wasmtime.Engine, cache_dir: Path | None, pooling: bool) -> wasmtime.Module:
    if cache_dir is not None:
        cached = cached_image(cache_dir, pooling)
        if cached.exists():
            try:
                # Only deserialize what we wrote ourselves: the cache dir is trusted.
                return wasmtime.Module.deserialize_file(engine, str(cached))
            except Exception:
                cached.unlink(missing_ok=True)
    wasm = _snapshot.with_exports(wasm_path().read_bytes())
    module = wasmtime.Module(engine, _snapshot.take(wasm, load_bootstrap()))
    if cache_dir is not None:
        cached.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=cached.parent, suffix=".tmp")
        with os.fdopen(fd, "wb") as out:
            out.write(module.serialize())
        os.replace(tmp, cached)  # atomic: concurrent processes never see half a file
    return module
