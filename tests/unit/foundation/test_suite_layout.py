"""The suite's own layout: `make test` runs the `timing` tests in a second pytest run that collects only
tests/acceptance (collecting the whole suite again took seconds), so a timing test anywhere else would
run in neither part."""

from __future__ import annotations

from pathlib import Path

TESTS = Path(__file__).resolve().parents[2]


def test_every_timing_test_lives_under_tests_acceptance() -> None:
    marked = {p.relative_to(TESTS).as_posix() for p in TESTS.rglob("*.py")
              if p != Path(__file__).resolve() and "mark.timing" in p.read_text(encoding="utf-8")}
    assert marked, "no test is marked timing: has the marker been renamed?"
    assert {m for m in marked if not m.startswith("acceptance/")} == set()


def test_make_test_runs_the_timing_session_on_tests_acceptance() -> None:
    makefile = (TESTS.parent / "Makefile").read_text(encoding="utf-8")
    assert "-m timing" in makefile and "-m timing --durations=10 $(or $(PYTEST_ARGS),tests/acceptance)" in makefile



def test_make_test_distributes_test_by_test() -> None:
    """Not --dist loadgroup/loadscope/loadfile: under those, schemathesis's per-operation items of
    tests/fuzz were reported as 3 tests instead of 59, one of them running every operation on one worker."""
    makefile = (TESTS.parent / "Makefile").read_text(encoding="utf-8")
    assert "--dist" not in makefile
