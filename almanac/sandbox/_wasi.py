"""Everything the guest can call outside its own instance: a clock, and five host functions.

Our reactor (``reactor/almanac_qjs.c``) links no quickjs-libc, so it has no
``qjs:std``/``qjs:os`` and makes no file-system calls.  What wasi-libc still
imports is answered here with refusals: every descriptor is ``EBADF`` (the
guest has none: no stdin, no stdout, no preopened directory, no bridge fd),
``proc_exit`` stops the run.  The clock is the one real WASI function.

The reactor's own imports (module ``almanac``) are the only way out:

* ``call(ptr, len) -> reply_len``: one capability request (JSON text, at most
  ``RunIO.request_cap`` bytes, else refused without reading it); the reply is
  kept for ``reply(ptr, len)``, which copies it into the guest;
* ``log(ptr, len)``: appended to the run's logs, read only up to the cap;
* ``finish(kind, ptr, len)``: how the run ended (the first call counts);
* ``idle()``: the run's promise is pending with nothing left to run, so it can
  only wait for its deadline: sleep until then and stop the run.

Every one of them is linear in what it reads and checks the run's deadline,
so the host's work per call is bounded by the run's deadline.

The functions are registered once on a process-wide Linker (raw, through
``_native``) and find the current run through a thread-local, so one
InstancePre serves every thread.  Each gets the run's ``RunIO`` and its
arguments as ints (i32 as unsigned, i64 as signed).
"""

from __future__ import annotations

import logging
import struct
import threading
import time
from typing import TYPE_CHECKING, Callable, Protocol

from . import _native

if TYPE_CHECKING:
    import wasmtime

log = logging.getLogger("almanac.sandbox")

ESUCCESS, EBADF = 0, 8
FINISH_RESULT, FINISH_ERROR, FINISH_UNCAUGHT = 0, 1, 2
MAX_ERROR_TEXT = 320 * 1024  # of an error's JSON a guest reports: bootstrap.js cuts its parts to fit this


class HostExit(Exception):
    """Raised inside a host function to stop the guest (exit, host deadline).

    It becomes a trap in the guest; the reason is recorded on the run's own
    ``RunIO`` and read from there.
    """


class GuestMemory(Protocol):
    """The guest's linear memory as host functions see it: ``_native.Memory``, or ``_public``'s."""

    def read(self, ptr: int, length: int) -> bytes: ...
    def write(self, ptr: int, data: bytes) -> None: ...


class RunIO:
    """Everything one run's guest can hand the host, and the host's answers."""

    def __init__(self, deadline: float, log_cap: int, output_cap: int, request_cap: int,
                 on_request: Callable[[bytes], bytes]) -> None:
        self.deadline = deadline  # time.monotonic() after which host calls stop the guest
        self.log_cap = log_cap
        self.logs = bytearray()
        self.logs_truncated = False
        self.output_cap = output_cap
        self.request_cap = request_cap
        self.on_request = on_request
        self.reply = b""
        self.finished: tuple[int, bytes] | None = None  # (kind, text), the first finish
        self.output_size = 0  # of a result over output_cap, which is not read
        self.memory: GuestMemory | None = None
        self.exit_reason: str | None = None
        # The host stopped the guest at one of its own calls (a fetch past the deadline, a promise that can
        # no longer settle, exit), not in the middle of the guest's code.
        self.stopped_at_call = False

    def log(self, ptr: int, length: int) -> None:
        room = self.log_cap - len(self.logs)
        if length > room:
            self.logs_truncated = True
            length = max(room, 0)
        assert self.memory is not None  # bound before the guest runs, so before it can log
        self.logs += self.memory.read(ptr, length)

    def stop(self, reason: str) -> None:
        self.exit_reason = reason
        self.stopped_at_call = True
        raise HostExit(reason)


class _Current(threading.local):
    io: RunIO | None = None  # a thread that never bound a run sees None


_current = _Current()


def bind(io: RunIO | None) -> None:
    """Make ``io`` the world of the calling thread (None to clear)."""
    _current.io = io


def current() -> RunIO | None:
    """The calling thread's run, if any."""
    return _current.io


def _check_deadline(io: RunIO) -> None:
    if time.monotonic() > io.deadline:
        io.stop("timed_out")


# --- wasi_snapshot_preview1: a clock, and refusals -----------------------------

def clock_time_get(io, clock_id, precision, out_ptr):
    # Realtime for Date, monotonic for everything else; nanoseconds.
    now = time.time_ns() if clock_id == 0 else time.monotonic_ns()
    io.memory.write(out_ptr, struct.pack("<Q", now))
    return ESUCCESS


def no_descriptor(io, fd, *_args):
    """There is no descriptor at all: not 0, 1, 2, nor any other."""
    return EBADF


def proc_exit(io, code):
    io.stop("exit")


# --- almanac: the reactor's channel to the host --------------------------------

def host_call(io, ptr, length):
    if length > io.request_cap:  # refused unread: the host's work stays bounded
        io.reply = b'{"e":"request too large"}'
    else:
        io.reply = io.on_request(io.memory.read(ptr, length))
    _check_deadline(io)
    return len(io.reply)


def host_reply(io, ptr, length):
    io.memory.write(ptr, io.reply[:length])
    io.reply = b""


def host_log(io, ptr, length):
    io.log(ptr, length)
    _check_deadline(io)


def host_finish(io, kind, ptr, length):
    if io.finished is not None:
        return
    if kind == FINISH_RESULT and length > io.output_cap:
        io.output_size, text = length, b""  # too large: measured, not read
    else:
        text = io.memory.read(ptr, min(length, io.output_cap if kind == FINISH_RESULT else MAX_ERROR_TEXT))
    io.finished = (kind, text)


def host_idle(io):
    """Nothing can settle the run's promise any more: it waits for its deadline, without CPU."""
    remaining = io.deadline - time.monotonic()
    if remaining > 0:
        time.sleep(remaining + 0.001)
    io.stop("timed_out")


# (module, name) -> (python function, wasm parameter types, has an i32 result)
IMPORTS: dict[tuple[str, str], tuple[Callable, str, bool]] = {
    ("wasi_snapshot_preview1", "clock_time_get"): (clock_time_get, "iIi", True),
    ("wasi_snapshot_preview1", "fd_close"): (no_descriptor, "i", True),
    ("wasi_snapshot_preview1", "fd_fdstat_get"): (no_descriptor, "ii", True),
    ("wasi_snapshot_preview1", "fd_seek"): (no_descriptor, "iIii", True),
    ("wasi_snapshot_preview1", "fd_write"): (no_descriptor, "iiii", True),
    ("wasi_snapshot_preview1", "proc_exit"): (proc_exit, "i", False),
    ("almanac", "call"): (host_call, "ii", True),
    ("almanac", "reply"): (host_reply, "ii", False),
    ("almanac", "log"): (host_log, "ii", False),
    ("almanac", "finish"): (host_finish, "iii", False),
    ("almanac", "idle"): (host_idle, "", False),
}


def _trap_message(exc: BaseException) -> bytes:
    if isinstance(exc, HostExit):
        return f"host exit: {exc}".encode()
    if not isinstance(exc, _native.Fault):
        log.error("sandbox.host_call_failed", exc_info=exc)
    return f"host call failed: {type(exc).__name__}".encode()


def define(linker: wasmtime.Linker) -> None:
    """Register every import the reactor may use on ``linker``."""
    for (module, name), (func, params, has_result) in IMPORTS.items():
        _native.define(linker, module, name, params, has_result, func, current, _trap_message)
