"""Run mypy on almanac/ and fail only on errors that are not in the committed baseline.

The baseline (`tools/mypy-baseline.txt`) lists the errors the code had when type checking began,
without line numbers (so moving code does not churn it). Fix one and the tool says the baseline can
shrink (`--update` rewrites it); add one and `make lint` fails, naming it.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BASELINE = ROOT / "tools" / "mypy-baseline.txt"
LINE = re.compile(r"^(?P<path>[^:]+):\d+(?::\d+)?: error: (?P<rest>.*)$")


def current_errors() -> Counter[str]:
    done = subprocess.run([sys.executable, "-m", "mypy", "--no-error-summary", "--no-pretty"], cwd=ROOT,
                          capture_output=True, text=True)
    if done.returncode not in (0, 1):
        sys.exit(f"mypy did not run:\n{done.stdout}{done.stderr}")
    found = (LINE.match(line) for line in done.stdout.splitlines())
    return Counter(f"{m['path']}: {m['rest']}" for m in found if m)


def main(argv: list[str]) -> int:
    errors = current_errors()
    if "--update" in argv:
        BASELINE.write_text("".join(f"{e}\n" for e in sorted(errors.elements())))
        print(f"mypy baseline: {sum(errors.values())} errors written to {BASELINE.relative_to(ROOT)}")
        return 0
    baseline = Counter(BASELINE.read_text().splitlines()) if BASELINE.exists() else Counter()
    new, fixed = errors - baseline, baseline - errors
    for error in sorted(new.elements()):
        print(f"new mypy error: {error}")
    if fixed:
        print(f"mypy: {sum(fixed.values())} baseline error(s) are fixed; shrink it: python tools/mypy_baseline.py --update")
    print(f"mypy: {sum(errors.values())} errors, {sum(baseline.values())} in the baseline, {sum(new.values())} new")
    return 1 if new else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
