"""Sandboxed JavaScript for tenants' scripts: QuickJS compiled to WASI, run in wasmtime.

A leaf package: it imports nothing else from ``almanac`` but ``jsonsafe`` (itself a leaf).
Names are loaded on first use, so that ``almanac.sandbox.contract`` (pure data, the run
contract the platform records) can be imported without loading wasmtime.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .capabilities import Capabilities, CapabilityError, InMemoryCapabilities, NullCapabilities
    from .contract import Effects, RunRequest, RunResult
    from .limits import Limits
    from .pool import SandboxPool
    from .runtime import Sandbox, SyntaxProblem

_WHERE = {
    "Capabilities": "capabilities", "CapabilityError": "capabilities", "InMemoryCapabilities": "capabilities",
    "NullCapabilities": "capabilities", "Limits": "limits", "SandboxPool": "pool", "Sandbox": "runtime",
    "SyntaxProblem": "runtime", "RunRequest": "contract", "RunResult": "contract", "Effects": "contract",
}

__all__ = ["Capabilities", "CapabilityError", "Effects", "InMemoryCapabilities", "Limits", "NullCapabilities",
           "RunRequest", "RunResult", "Sandbox", "SandboxPool", "SyntaxProblem"]


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value
