"""Run one tenant script in a fresh QuickJS instance inside wasmtime.

Each ``Sandbox.run`` builds a new Store and instance (nothing survives between
runs) from the image of an initialised interpreter (``_snapshot``), calls the
reactor's ``almanac_run`` with the job and the script (it drives the run's
promise to completion), and reads the outcome the guest reported through its
``finish`` import (``_wasi``); capability calls go through ``_bridge``, whose
buffer keeps the run's writes: a succeeded run's ``RunResult`` carries them
(``contract.Effects``), any other carries none.

Caps, all enforced by the host:
* time: epoch interruption (``_engine._Deadlines``) plus a check in every host
  call, so no JavaScript can outlive its deadline;
* memory: ``Store.set_limits(memory_size=...)`` caps linear memory (wasmtime
  refuses ``memory.grow``), and QuickJS's own heap limit sits under it so
  most overruns surface as a clean ``out of memory``;
* stack: QuickJS's own stack check (``_snapshot.MAX_STACK`` of the 2 MB
  shadow stack) and wasmtime's ``max_wasm_stack``, so deep recursion ends in
  a RangeError or a stack-overflow trap that only discards this run's instance;
* output, logs and values: measured in the host functions (``_wasi``) and the
  capability checks (``capabilities.REGISTRY``).
"""

from __future__ import annotations

import json
import os
import re
import struct
import time
from dataclasses import dataclass, replace
from pathlib import Path

import wasmtime

from . import _engine, _native, _wasi
from ._bridge import Bridge, loads
from .capabilities import Capabilities, NullCapabilities, request_cap
from .contract import RunRequest, RunResult
from .limits import MIB, Limits

STATIC_MEMORY = 4 * MIB  # QuickJS's data segments and 2 MB C stack, beyond the JS heap
REQUEST_OVERHEAD = 64 * 1024  # a capability request may exceed its value by this much (key, op, JSON)
BOOTSTRAP_FRAMES = "<bootstrap>"  # the bootstrap's own frames are named so; they are cut from stacks
CHECK_LIMITS = Limits(timeout_ms=2000, memory_mb=64)

# Built once: json.dumps with options builds an encoder per call.
_JOB_ENCODER = json.JSONEncoder(ensure_ascii=False, allow_nan=False)
_FRAME = re.compile(r"(?:/script\.js|<evalScript>):(\d+):(\d+)")


@dataclass(frozen=True)
class SyntaxProblem:
    message: str
    line: int
    column: int


class Sandbox:
    """Runs scripts; thread-safe; cheap to call once constructed."""

    def __init__(self, cache_dir: Path | None = None) -> None:
        self._shared = _engine.acquire(cache_dir)
        self._closed = False
        if self._shared.image_memory >= STATIC_MEMORY:  # a bigger bootstrap would eat the scripts' heap
            self.close()
            raise RuntimeError(f"the sandbox image ({self._shared.image_memory} bytes) outgrew STATIC_MEMORY")

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            _engine.release(self._shared)

    def __enter__(self) -> "Sandbox":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def check_syntax(self, source: str) -> SyntaxProblem | None:
        """Parse ``source`` as a module without running it."""
        result, _ = self._execute(source, {"mode": "check", "logBytes": 0}, CHECK_LIMITS,
                                  Bridge(NullCapabilities(), CHECK_LIMITS, frozenset()))
        if result.status == "succeeded":
            return None
        return SyntaxProblem(result.error or "invalid script", result.error_line or 1,
                             result.error_column or 1)

    def execute(self, request: RunRequest, caps: Capabilities) -> RunResult:
        """Run the request's script on its event; never raises for the script's sake."""
        return self.execute_telling(request, caps)[0]

    def execute_telling(self, request: RunRequest, caps: Capabilities) -> tuple[RunResult, bool]:
        """``execute``, and whether the run was cut off inside the guest's own code (its deadline's
        interrupt, or its memory): a pool worker makes way for a fresh process after such a run.

        A run the host stopped at one of its own calls (a fetch past the deadline, a promise that can
        no longer settle) interrupted nothing: its worker goes on, so that runs waiting on the network
        until their deadline do not cost a process start each."""
        job = {"mode": "run", "event": request.event, "logBytes": request.limits.log_bytes}
        result, io = self._execute(request.source, job, request.limits, Bridge(caps, request.limits, request.may))
        cut_off = result.status == "memory_exceeded" or (result.status == "timed_out" and not io.stopped_at_call)
        return result, cut_off

    def run(self, source: str, event: dict, limits: Limits, caps: Capabilities) -> RunResult:
        """``execute`` of the request these make (every capability allowed)."""
        return self.execute(RunRequest(source, event, limits), caps)

    def _execute(self, source: str, job: dict, limits: Limits, bridge: Bridge) -> tuple[RunResult, _wasi.RunIO]:
        if self._closed:
            raise RuntimeError("sandbox is closed")
        started, cpu_started = time.monotonic(), time.thread_time()
        io = _wasi.RunIO(started + limits.timeout_ms / 1000, limits.log_bytes, limits.output_bytes,
                         request_cap(limits.kv_value_bytes, REQUEST_OVERHEAD), bridge.handle)
        shared = self._shared
        with shared.slots:  # an instance slot of the pooling allocator
            # The image (static data, the 2 MB C stack, the bootstrap's heap) lies within STATIC_MEMORY,
            # as the module's initial memory did before the snapshot: the wall is where it was.
            store = _native.RunStore(shared.engine, limits.memory_mb * MIB + STATIC_MEMORY)
            deadlines = shared.deadlines
            token = deadlines.begin(store, io.deadline)
            _wasi.bind(io)
            try:
                trap = self._enter(store, io, _job_json(job), source.encode("utf-8", "surrogatepass"), limits)
            finally:
                deadlines.end(token)
                _wasi.bind(None)
                memory_used = store.memory_size()
                store.close()
        outcome = _outcome(io, trap, memory_used - shared.image_memory, limits, started)
        return with_effects(outcome, bridge, int((time.thread_time() - cpu_started) * 1000)), io

    def _enter(self, store: _native.RunStore, io: _wasi.RunIO, job: bytes, script: bytes,
               limits: Limits) -> BaseException | None:
        """Instantiate the image and make the run's one call into it (two if the job needs the heap)."""
        try:
            io.memory = store.instantiate(self._shared.pre)
            size, buffer = len(job) + len(script) + 1, self._shared.buffer
            if size > self._shared.buffer_size:
                buffer = store.call(b"almanac_alloc", size)
                if buffer == 0:
                    raise MemoryError("the guest could not allocate the job")
                io.memory.refresh(store.context)  # the guest may have grown its memory
            io.memory.write(buffer, job + script + b"\0")
            store.call(b"almanac_run", buffer, len(job), buffer + len(job), len(script), limits.memory_mb * MIB)
        except Exception as exc:  # traps (HostExit's included), wasmtime errors
            return exc
        return None


def _job_json(job: dict) -> bytes:
    """The job as JSON, parsed by JSON.parse inside, so an object literal's rules (``__proto__``) never apply."""
    job["seed"] = list(struct.unpack("<4I", os.urandom(16)))
    return _JOB_ENCODER.encode(job).encode("utf-8", "surrogatepass")


def _outcome(io: _wasi.RunIO, trap: BaseException | None, memory_grown: int, limits: Limits,
             started: float) -> RunResult:
    logs = tuple(io.logs.decode("utf-8", "replace").splitlines()) + (("[truncated]",) if io.logs_truncated else ())
    elapsed = time.monotonic() - started
    duration = int(elapsed * 1000)
    kind, text = io.finished or (None, b"")
    error = _error_from(kind, text)
    # Linear memory that grew through most of the heap allowance: a failure
    # now is the heap running out (QuickJS may even throw null when it cannot
    # allocate the error itself).
    near_cap = memory_grown >= 0.75 * limits.memory_mb * MIB
    if _timed_out(trap, io, elapsed, limits):
        return _ended("timed_out", f"timed out after {limits.timeout_ms} ms", logs, duration)
    if _is_oom(error) or (near_cap and kind != _wasi.FINISH_RESULT):
        return _ended("memory_exceeded", f"memory limit of {limits.memory_mb} MB exceeded", logs, duration)
    if error is not None:
        return _failed(error, logs, duration)
    if trap is not None:
        return _ended("failed", _describe_trap(trap, io), logs, duration)
    if kind is None:
        return _ended("failed", "the script ended without a result", logs, duration)
    if io.output_size:
        return _ended("failed", f"output is {io.output_size} bytes, over the {limits.output_bytes}-byte limit",
                      logs, duration)
    return _succeeded(text, logs, duration)


def _error_from(kind: int | None, text: bytes) -> dict | None:
    """The guest's report of an uncaught error as {name, message, stack} (all str), or None."""
    if kind == _wasi.FINISH_UNCAUGHT:
        name, _, message = text.decode("utf-8", "replace").partition(": ")
        return {"name": name or "Error", "message": message, "stack": ""}
    if kind != _wasi.FINISH_ERROR:
        return None
    try:
        found = loads(text)
    except ValueError:
        found = None
    if not isinstance(found, dict):
        return {"name": "Error", "message": "the script's error could not be read", "stack": ""}
    return {key: str(found.get(key) or "") for key in ("name", "message", "stack")}


def _timed_out(trap: BaseException | None, io: _wasi.RunIO, elapsed: float, limits: Limits) -> bool:
    if io.exit_reason == "timed_out":
        return True
    # A trap we cannot attribute (see _wasi.HostExit) past the deadline is a timeout.
    return trap is not None and io.exit_reason is None and elapsed * 1000 >= limits.timeout_ms


def _is_oom(error: dict | None) -> bool:
    # "string too long": QuickJS concatenates by rope, so doubling a string
    # reaches the 2**30 length cap before it touches the heap limit.
    return bool(error) and error.get("name") == "InternalError" and str(
        error.get("message")) in ("out of memory", "string too long")


def _describe_trap(trap: BaseException, io: _wasi.RunIO) -> str:
    if io.exit_reason == "exit":
        return "the script called exit"
    if isinstance(trap, wasmtime.Trap) and trap.trap_code == wasmtime.TrapCode.STACK_OVERFLOW:
        return "RangeError: stack overflow"
    return "InternalError: the interpreter stopped (wasm trap)"


def with_effects(result: RunResult, bridge: Bridge, cpu_ms: int | None = None) -> RunResult:
    """The result with what its run left to apply: its buffered writes if it succeeded, else nothing;
    and the run's ``cpu_ms`` when given.  (One ``replace``: each costs microseconds per run.)

    A run that was refused by a platform limit and did not succeed is not retried.
    """
    buffer = bridge.buffer
    changes: dict = {} if cpu_ms is None else {"cpu_ms": cpu_ms}
    if result.status == "succeeded":
        effects = buffer.effects()
        if effects:
            changes["effects"] = effects
    elif buffer.refused is not None:
        changes["refused"] = buffer.refused
    return replace(result, **changes) if changes else result


def _ended(status: str, error: str, logs: tuple[str, ...], duration: int) -> RunResult:
    return RunResult(status, None, error, None, None, logs, duration)


def _failed(error: dict, logs: tuple[str, ...], duration: int) -> RunResult:
    stack = str(error.get("stack") or "")
    frame = _FRAME.search(stack)
    # Keep only the script's frames: the bootstrap's are noise to a tenant.
    own = "\n".join(l for l in stack.splitlines() if BOOTSTRAP_FRAMES not in l and "(native)" not in l)
    message = f"{error.get('name', 'Error')}: {error.get('message', '')}"
    return RunResult("failed", None, message, int(frame.group(1)) if frame else None,
                     int(frame.group(2)) if frame else None, logs, duration, own or None)


def _succeeded(output_json: bytes, logs: tuple[str, ...], duration: int) -> RunResult:
    try:
        output = loads(output_json)
    except ValueError as exc:
        return _ended("failed", f"output is not JSON the host can store ({exc})", logs, duration)
    return RunResult("succeeded", output, None, None, None, logs, duration)
