"""Rewrite a wasm binary into a pre-initialised image (Wizer's idea, in Python).

Creating a QuickJS runtime and context, and compiling the bootstrap, cost
about three quarters of a trivial run.  That work is the same for every run,
so it is done once: the QuickJS module is instantiated, initialised, and its
linear memory and mutable globals are then written back into a new module as
data segments and global initialisers.  Every run instantiates that image
instead (wasmtime maps the data copy-on-write from a memory image) and calls
straight into JavaScript, starting from the state of a fresh, initialised
interpreter.  Nothing a run does survives it: each run still gets its own
instance.

Only what this needs of the binary format is here: the section layout, the
export, memory, global and data sections, and the ``name`` custom section
(to find internal functions by name, so they can be exported).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MAGIC = b"\0asm\x01\0\0\0"
TYPE, IMPORT, FUNCTION, MEMORY, GLOBAL, EXPORT, START, DATA, DATACOUNT = 1, 2, 3, 5, 6, 7, 8, 11, 12
KIND_FUNC, KIND_GLOBAL = 0, 3
I32_CONST, END = 0x41, 0x0B
PAGE = 65536
ZERO_GAP = 4096  # runs of zeros at least this long split a data segment


class WasmFormatError(ValueError):
    """The binary is not the kind of module this rewriter understands."""


def uleb(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def sleb(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        done = (value == 0 and not byte & 0x40) or (value == -1 and byte & 0x40)
        out.append(byte | (0 if done else 0x80))
        if done:
            return bytes(out)


def read_uleb(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return result, pos


def _vec(items: list[bytes]) -> bytes:
    return uleb(len(items)) + b"".join(items)


def _name(text: str) -> bytes:
    raw = text.encode()
    return uleb(len(raw)) + raw


@dataclass
class Section:
    id: int
    body: bytes

    def custom_name(self) -> str | None:
        if self.id != 0:
            return None
        size, pos = read_uleb(self.body, 0)
        return self.body[pos:pos + size].decode("utf-8", "replace")


def parse(wasm: bytes) -> list[Section]:
    if not wasm.startswith(MAGIC):
        raise WasmFormatError("not a wasm module (version 1)")
    sections, pos = [], len(MAGIC)
    while pos < len(wasm):
        size, start = read_uleb(wasm, pos + 1)
        sections.append(Section(wasm[pos], wasm[start:start + size]))
        pos = start + size
    return sections


def build(sections: list[Section]) -> bytes:
    return MAGIC + b"".join(bytes([s.id]) + uleb(len(s.body)) + s.body for s in sections)


def _section(sections: list[Section], section_id: int) -> Section:
    for section in sections:
        if section.id == section_id:
            return section
    raise WasmFormatError(f"the module has no section {section_id}")


def function_names(sections: list[Section]) -> dict[str, int]:
    """Function name -> index, from the ``name`` custom section."""
    for section in sections:
        if section.custom_name() == "name":
            break
    else:
        raise WasmFormatError("the module has no name section")
    body = section.body
    size, pos = read_uleb(body, 0)
    pos += size
    names: dict[str, int] = {}
    while pos < len(body):
        sub = body[pos]
        size, start = read_uleb(body, pos + 1)
        if sub == 1:  # function names
            count, at = read_uleb(body, start)
            for _ in range(count):
                index, at = read_uleb(body, at)
                length, at = read_uleb(body, at)
                names.setdefault(body[at:at + length].decode("utf-8", "replace"), index)
                at += length
        pos = start + size
    return names


def add_exports(wasm: bytes, functions: dict[str, str], globals_: dict[str, int]) -> bytes:
    """Export internal functions (export name -> internal name) and globals (name -> index)."""
    sections = parse(wasm)
    names = function_names(sections) if functions else {}
    missing = [internal for internal in functions.values() if internal not in names]
    if missing:
        raise WasmFormatError(f"the module has no functions named {', '.join(missing)}")
    export = _section(sections, EXPORT)
    count, pos = read_uleb(export.body, 0)
    entries = [_name(name) + bytes([KIND_FUNC]) + uleb(names[internal])
               for name, internal in functions.items()]
    entries += [_name(name) + bytes([KIND_GLOBAL]) + uleb(index) for name, index in globals_.items()]
    export.body = uleb(count + len(entries)) + export.body[pos:] + b"".join(entries)
    return build(sections)


def snapshot(wasm: bytes, memory: bytes, globals_: dict[int, int]) -> bytes:
    """``wasm`` with its linear memory replaced by ``memory`` and i32 globals set.

    ``globals_`` maps a (module-defined) global's index to its value; the
    module must import no globals, so indices are positions in its global
    section.  The result must never run its start or ``_initialize`` again.
    """
    if len(memory) % PAGE:
        raise WasmFormatError("memory is not a whole number of pages")
    sections = parse(wasm)
    if any(s.id == START for s in sections):
        raise WasmFormatError("a module with a start function cannot be snapshotted")
    _set_memory_minimum(_section(sections, MEMORY), len(memory) // PAGE)
    _set_globals(_section(sections, GLOBAL), globals_)
    segments = _segments(memory)
    _section(sections, DATA).body = _vec(
        [b"\0" + bytes([I32_CONST]) + sleb(offset) + bytes([END]) + uleb(len(chunk)) + chunk
         for offset, chunk in segments])
    for section in sections:
        if section.id == DATACOUNT:
            section.body = uleb(len(segments))
    return build(sections)


def _set_memory_minimum(section: Section, pages: int) -> None:
    count, pos = read_uleb(section.body, 0)
    if count != 1:
        raise WasmFormatError("expected exactly one memory")
    flags = section.body[pos]
    if flags not in (0, 1):
        raise WasmFormatError("shared or 64-bit memories are not supported")
    _old, after = read_uleb(section.body, pos + 1)
    section.body = uleb(1) + bytes([flags]) + uleb(pages) + section.body[after:]


def _set_globals(section: Section, values: dict[int, int]) -> None:
    count, pos = read_uleb(section.body, 0)
    out = []
    for index in range(count):
        head = section.body[pos:pos + 2]  # value type, mutability
        end = _const_expr_end(section.body, pos + 2)
        init = section.body[pos + 2:end]
        pos = end
        if index in values:
            if head[0] != 0x7F:
                raise WasmFormatError(f"global {index} is not an i32")
            value = values[index]
            init = bytes([I32_CONST]) + sleb(value - (1 << 32) if value >= 1 << 31 else value) + bytes([END])
        out.append(head + init)
    section.body = _vec(out)


def _const_expr_end(body: bytes, pos: int) -> int:
    """The position just past a constant expression (one instruction, then ``end``)."""
    opcode = body[pos]
    if opcode in (0x41, 0x42, 0x23):  # i32.const, i64.const (LEB), global.get (index)
        _value, pos = read_uleb(body, pos + 1)  # a signed LEB has the same length
    elif opcode in (0x43, 0x44):  # f32.const, f64.const
        pos += 1 + (4 if opcode == 0x43 else 8)
    else:
        raise WasmFormatError(f"unsupported constant expression opcode {opcode:#x}")
    if body[pos] != END:
        raise WasmFormatError("constant expression longer than one instruction")
    return pos + 1


_NONZERO = re.compile(rb"[^\0]")


def _segments(memory: bytes) -> list[tuple[int, bytes]]:
    """The non-zero parts of ``memory`` as (offset, bytes), split at long runs of zeros."""
    segments, zeros = [], bytes(ZERO_GAP)
    found = _NONZERO.search(memory)
    while found:
        start = found.start()
        end = memory.find(zeros, start)
        end = len(memory) if end < 0 else end
        segments.append((start, memory[start:end].rstrip(b"\0")))
        found = _NONZERO.search(memory, end)
    return segments
