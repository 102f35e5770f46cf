"""Sandboxed JavaScript for tenants' scripts: QuickJS compiled to WASI, run in wasmtime.

A leaf package: it imports nothing else from ``almanac``.
"""

from .capabilities import Capabilities, CapabilityError, InMemoryCapabilities, NullCapabilities
from .limits import Limits
from .pool import SandboxPool
from .runtime import RunResult, Sandbox, SyntaxProblem

__all__ = ["Capabilities", "CapabilityError", "InMemoryCapabilities", "Limits",
           "NullCapabilities", "RunResult", "Sandbox", "SandboxPool", "SyntaxProblem"]
