"""A deliberately tiny WASI preview1 host for the QuickJS reactor.

We do not use wasmtime's own WASI (``Linker.define_wasi``) because it would
hand the guest a real clock-sleeping ``poll_oneoff`` (a native call that epoch
interruption cannot stop) and real file descriptors.  Here every import the
module needs is a Python function we wrote, so the guest's whole view of the
world is:

* fd 0: an empty stdin; fd 1 and 2: the run's log buffer (capped);
* fd 3: a read-only virtual directory ``/`` holding exactly one file,
  ``script.js`` (the tenant's source), so QuickJS's module loader can load it;
* fds ``BRIDGE_OUT``/``BRIDGE_IN``: the capability bridge (one JSON request
  line written, one JSON reply line read);
* a clock; no environment, no arguments, no other files, no network.

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
from typing import Callable

import wasmtime

from . import _native

log = logging.getLogger("almanac.sandbox")

BRIDGE_OUT = 100  # guest writes requests here
BRIDGE_IN = 101  # guest reads replies here
ROOT_FD = 3
SCRIPT_NAME = b"script.js"

# WASI errno values (wasi_snapshot_preview1).
ESUCCESS, EBADF, EINVAL, ENOENT, ENOTSUP, ESPIPE, ENOTCAPABLE = 0, 8, 28, 44, 58, 70, 76
FILETYPE_CHAR, FILETYPE_DIR, FILETYPE_FILE = 2, 3, 4
ALL_RIGHTS = (1 << 64) - 1


class HostExit(Exception):
    """Raised inside a host function to stop the guest (exit, host deadline).

    It becomes a trap in the guest; the reason is recorded on the run's own
    ``RunIO`` and read from there.
    """


class RunIO:
    """Everything one run's guest can read or write through WASI."""

    def __init__(self, script: bytes, deadline: float, log_cap: int,
                 on_request: Callable[[bytes], bytes]) -> None:
        self.script = script
        self.deadline = deadline  # time.monotonic() after which host calls stop the guest
        self.log_cap = log_cap
        self.logs = bytearray()
        self.logs_truncated = False
        self.on_request = on_request
        self.request = bytearray()
        self.oversized = False
        self.reply = b""
        self.files: dict[int, list] = {}  # fd -> [data, position]
        self.next_fd = 10
        self.memory: _native.Memory | None = None
        self.exit_reason: str | None = None

    def log(self, data: bytes) -> None:
        room = self.log_cap - len(self.logs)
        if len(data) > room:
            self.logs += data[:max(room, 0)]
            self.logs_truncated = True
        else:
            self.logs += data

    def stop(self, reason: str) -> None:
        self.exit_reason = reason
        raise HostExit(reason)


class _Current(threading.local):
    io: RunIO | None = None  # a thread that never bound a run sees None


_current = _Current()


def bind(io: RunIO | None) -> None:
    """Make ``io`` the WASI world of the calling thread (None to clear)."""
    _current.io = io


def current() -> RunIO | None:
    """The calling thread's run, if any."""
    return _current.io


def _put(io: RunIO, ptr: int, fmt: str, *values) -> None:
    io.memory.write(ptr, struct.pack(fmt, *values))


def _iovecs(io: RunIO, iovs: int, count: int) -> list[tuple[int, int]]:
    raw = io.memory.read(iovs, 8 * count)
    return [struct.unpack_from("<II", raw, 8 * i) for i in range(count)]


def _check_deadline(io: RunIO) -> None:
    if time.monotonic() > io.deadline:
        io.stop("timed_out")


# --- the imports -----------------------------------------------------------

def environ_sizes_get(io, count_ptr, size_ptr):
    _put(io, count_ptr, "<I", 0)
    _put(io, size_ptr, "<I", 0)
    return ESUCCESS


def environ_get(io, environ, buf):
    return ESUCCESS


def clock_time_get(io, clock_id, precision, out_ptr):
    # Realtime for Date, monotonic for everything else; nanoseconds.
    now = time.time_ns() if clock_id == 0 else time.monotonic_ns()
    _put(io, out_ptr, "<Q", now)
    return ESUCCESS


def fd_close(io, fd):
    io.files.pop(fd, None)
    return ESUCCESS


def fd_fdstat_get(io, fd, ptr):
    if fd in (0, 1, 2, BRIDGE_OUT, BRIDGE_IN):
        kind = FILETYPE_CHAR
    elif fd == ROOT_FD:
        kind = FILETYPE_DIR
    elif fd in io.files:
        kind = FILETYPE_FILE
    else:
        return EBADF
    _put(io, ptr, "<BxHxxxxQQ", kind, 0, ALL_RIGHTS, ALL_RIGHTS)
    return ESUCCESS


def fd_fdstat_set_flags(io, fd, flags):
    return ENOTSUP


def fd_prestat_get(io, fd, ptr):
    if fd != ROOT_FD:
        return EBADF
    _put(io, ptr, "<BxxxI", 0, 1)  # a directory whose name is 1 byte long
    return ESUCCESS


def fd_prestat_dir_name(io, fd, path, length):
    if fd != ROOT_FD:
        return EBADF
    io.memory.write(path, b"/"[:length])
    return ESUCCESS


def fd_read(io, fd, iovs, count, nread_ptr):
    if fd == BRIDGE_IN:
        source = [io.reply, 0]
    elif fd in io.files:
        source = io.files[fd]
    elif fd == 0:
        source = [b"", 0]
    else:
        return EBADF
    total = 0
    for base, length in _iovecs(io, iovs, count):
        chunk = source[0][source[1]:source[1] + length]
        io.memory.write(base, chunk)
        source[1] += len(chunk)
        total += len(chunk)
        if len(chunk) < length:
            break
    if fd == BRIDGE_IN:
        io.reply = io.reply[source[1]:]
    _put(io, nread_ptr, "<I", total)
    return ESUCCESS


def fd_readdir(io, fd, buf, length, cookie, used_ptr):
    return ENOTSUP


def fd_seek(io, fd, offset, whence, out_ptr):
    entry = io.files.get(fd)
    if entry is None:
        return ESPIPE if fd in (0, 1, 2, BRIDGE_IN, BRIDGE_OUT) else EBADF
    base = {0: 0, 1: entry[1], 2: len(entry[0])}.get(whence)
    if base is None or base + offset < 0:
        return EINVAL
    entry[1] = base + offset
    _put(io, out_ptr, "<Q", entry[1])
    return ESUCCESS


def fd_write(io, fd, iovs, count, nwritten_ptr):
    if fd not in (1, 2, BRIDGE_OUT):
        return EBADF
    data = b"".join(io.memory.read(base, length) for base, length in _iovecs(io, iovs, count))
    if fd == BRIDGE_OUT:
        _bridge_write(io, data)
    else:
        io.log(data)
    _put(io, nwritten_ptr, "<I", len(data))
    _check_deadline(io)
    return ESUCCESS


MAX_REQUEST = 8 * 1024 * 1024  # far above any allowed value; bounds host memory


def _bridge_write(io: RunIO, data: bytes) -> None:
    """Collect a request line; answer each complete one into the reply buffer."""
    io.request += data
    while b"\n" in io.request:
        line, _, rest = bytes(io.request).partition(b"\n")
        io.request = bytearray(rest)
        too_large = io.oversized or len(line) > MAX_REQUEST
        reply = b'{"e": "request too large"}' if too_large else io.on_request(line)
        io.oversized = False
        io.reply += reply + b"\n"
    if len(io.request) > MAX_REQUEST:  # drop the rest of this line, answer it with an error
        io.request.clear()
        io.oversized = True


def path_open(io, dirfd, dirflags, path, path_len, oflags, rights, rights_inh, fdflags, fd_ptr):
    name = io.memory.read(path, path_len)
    if dirfd != ROOT_FD:
        return EBADF
    if name != SCRIPT_NAME:
        return ENOENT
    if oflags & 0b1110:  # O_CREAT / O_DIRECTORY / O_EXCL / O_TRUNC: read only here
        return ENOTCAPABLE
    fd = io.next_fd
    io.next_fd += 1
    io.files[fd] = [io.script, 0]
    _put(io, fd_ptr, "<I", fd)
    return ESUCCESS


def path_filestat_get(io, fd, flags, path, path_len, buf):
    return ENOTCAPABLE


def _refuse(*_args):
    return ENOTCAPABLE


def poll_oneoff(io, subs, events, count, nevents_ptr):
    """Timers: sleep at most until the run's deadline, then stop the guest.

    A guest sleeping in a host call cannot be interrupted by epochs, so the
    host itself bounds the sleep.
    """
    raw = io.memory.read(subs, 48 * count)
    wait_ns, out = None, []
    for i in range(count):
        userdata, tag = struct.unpack_from("<QB", raw, 48 * i)
        if tag == 0:  # clock
            timeout, flags = struct.unpack_from("<Q", raw, 48 * i + 24)[0], raw[48 * i + 40]
            clock_id = struct.unpack_from("<I", raw, 48 * i + 16)[0]
            now = time.time_ns() if clock_id == 0 else time.monotonic_ns()
            rel = timeout - now if flags & 1 else timeout
            wait_ns = rel if wait_ns is None else min(wait_ns, rel)
        out.append(struct.pack("<QHBxxxxxQHxxxxxx", userdata, 0, tag, 0, 0))
    if wait_ns and wait_ns > 0 and len(out) == count:
        remaining = io.deadline - time.monotonic()
        time.sleep(max(0.0, min(wait_ns / 1e9, remaining + 0.001)))
    _check_deadline(io)
    io.memory.write(events, b"".join(out))
    _put(io, nevents_ptr, "<I", len(out))
    return ESUCCESS


def proc_exit(io, code):
    io.stop("exit")


# name -> (python function, wasm parameter types, has an i32 result)
IMPORTS: dict[str, tuple[Callable, str, bool]] = {
    "environ_get": (environ_get, "ii", True),
    "environ_sizes_get": (environ_sizes_get, "ii", True),
    "clock_time_get": (clock_time_get, "iIi", True),
    "fd_close": (fd_close, "i", True),
    "fd_fdstat_get": (fd_fdstat_get, "ii", True),
    "fd_fdstat_set_flags": (fd_fdstat_set_flags, "ii", True),
    "fd_prestat_get": (fd_prestat_get, "ii", True),
    "fd_prestat_dir_name": (fd_prestat_dir_name, "iii", True),
    "fd_read": (fd_read, "iiii", True),
    "fd_readdir": (fd_readdir, "iiiIi", True),
    "fd_seek": (fd_seek, "iIii", True),
    "fd_write": (fd_write, "iiii", True),
    "path_create_directory": (_refuse, "iii", True),
    "path_filestat_get": (path_filestat_get, "iiiii", True),
    "path_filestat_set_times": (_refuse, "iiiiIIi", True),
    "path_open": (path_open, "iiiiiIIii", True),
    "path_remove_directory": (_refuse, "iii", True),
    "path_rename": (_refuse, "iiiiii", True),
    "path_unlink_file": (_refuse, "iii", True),
    "poll_oneoff": (poll_oneoff, "iiii", True),
    "proc_exit": (proc_exit, "i", False),
}


def _trap_message(exc: BaseException) -> bytes:
    if isinstance(exc, HostExit):
        return f"host exit: {exc}".encode()
    if not isinstance(exc, _native.Fault):
        log.error("sandbox.wasi_failed", exc_info=exc)
    return f"host call failed: {type(exc).__name__}".encode()


def define(linker: wasmtime.Linker) -> None:
    """Register every WASI import the QuickJS reactor needs on ``linker``."""
    for name, (func, params, has_result) in IMPORTS.items():
        _native.define(linker, "wasi_snapshot_preview1", name, params, has_result, func, current,
                       _trap_message)
