"""Fixtures for API tests whose scripts run in this process: no sandbox pool to start and stop per test.

Import both names into a test module to use them in place of conftest's `services`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from almanac.worker import SandboxRunner, build_services


@pytest.fixture(scope="module")
def sandbox_cache(sandbox_image_cache: Any) -> Any:
    return sandbox_image_cache


@pytest.fixture
def services(settings: Any, database: Any, manual_clock: Any, sandbox_cache: Any) -> Iterator[Any]:
    """Scripts run in this process; the compiled module is shared by the module's tests."""
    built = build_services(settings, clock=manual_clock, runner=SandboxRunner(sandbox_cache, processes=0))
    yield built
    built.scheduler.timer.stop(5)  # the recorder that runs started by requests use
    built.runner.close()
    built.db.dispose()
