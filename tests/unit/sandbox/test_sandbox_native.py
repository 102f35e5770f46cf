"""The raw host-call layer: guest pointers are bounds-checked, host bugs become traps."""

import ctypes

import pytest

from almanac.sandbox import _native, _wasi


def _memory(data: bytearray) -> _native.Memory:
    # A Memory over a host buffer, as if the guest's memory were this big.
    buf = (ctypes.c_char * len(data)).from_buffer(data)
    memory = _native.Memory.__new__(_native.Memory)
    memory.raw, memory.addr = buf, 0
    memory.base, memory.size = ctypes.addressof(buf), len(data)
    return memory


def test_reads_and_writes_stay_inside_guest_memory():
    data = bytearray(16)
    memory = _memory(data)
    memory.write(12, b"abcd")
    assert memory.read(12, 4) == b"abcd" and data[12:] == b"abcd"
    for ptr, length in ((13, 4), (16, 1), (2**32 - 1, 2)):
        with pytest.raises(_native.Fault):
            memory.read(ptr, length)
        with pytest.raises(_native.Fault):
            memory.write(ptr, b"x" * length)
    assert data[12:] == b"abcd"


def test_trap_messages_say_why_without_host_details():
    assert _wasi._trap_message(_wasi.HostExit("timed_out")) == b"host exit: timed_out"
    assert _wasi._trap_message(_native.Fault("read of 4 bytes at 99")) == b"host call failed: Fault"
