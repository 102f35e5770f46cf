"""Per-run caps of a sandboxed script."""

from __future__ import annotations

from dataclasses import dataclass

KIB = 1024
MIB = 1024 * KIB


@dataclass(frozen=True)
class Limits:
    """What one run may use; validated on construction.

    ``memory_mb`` is the JavaScript heap limit; the wasm linear memory is capped
    at ``memory_mb`` plus a fixed allowance for the interpreter's static data
    and C stack (see ``runtime.STATIC_MEMORY``), enforced by wasmtime.
    """

    timeout_ms: int = 1000
    memory_mb: int = 32
    output_bytes: int = 64 * KIB
    log_bytes: int = 64 * KIB
    kv_value_bytes: int = 64 * KIB

    def __post_init__(self) -> None:
        _check("timeout_ms", self.timeout_ms, 1, 30_000)
        _check("memory_mb", self.memory_mb, 1, 256)
        for name in ("output_bytes", "log_bytes", "kv_value_bytes"):
            _check(name, getattr(self, name), 0, 16 * MIB)


def _check(name: str, value: int, low: int, high: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise ValueError(f"{name} must be an integer in {low}..{high}, got {value!r}")
