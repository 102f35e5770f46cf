"""A worker has what its claims need loaded before its first claim.

The recurrence engine was imported on the first claim of a schedule's occurrence: in a
burst, each worker's first pass spent 60-160 ms in that import while holding the locks of
the rows it had picked (py-spy of a worker during `bench/pg_scale_bench.py`).
"""

import subprocess
import sys


def test_the_worker_module_loads_the_recurrence_engine() -> None:
    code = "import sys, almanac.worker; print('almanac.platform.recurrence' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == "True"
