"""`make bench`: run every benchmark in this folder, one after another, each printing its table."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main() -> int:
    failed = 0
    for script in sorted(HERE.glob("*_bench.py")):
        if len(sys.argv) > 1 and not any(name in script.name for name in sys.argv[1:]):
            continue
        print(f"\n=== {script.name} ===", flush=True)
        failed |= subprocess.run([sys.executable, str(script)], cwd=HERE.parent).returncode
    return failed


if __name__ == "__main__":
    sys.exit(main())
