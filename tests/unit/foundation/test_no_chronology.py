"""The tree speaks to users and operators: no issue numbers, commit hashes or work chronology.

A reader of the code or the guide needs the reason for a choice, not which piece of work made it
or in what order; that history lives in git. This scans every text file of the README, docs/,
almanac/, bench/ and tests/ for the telltale phrases.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
SUFFIXES = {".py", ".md", ".sql", ".html", ".js", ".css", ".txt", ".yml", ".yaml", ".toml", ".sh", ".ini", ".cfg"}
SKIP = {Path(__file__).resolve().relative_to(ROOT).as_posix()}  # this file names the phrases it refuses
_ORDINAL = (r"(?:first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|eleventh|twelfth|thirteenth"
            r"|fourteenth|fifteenth|sixteenth|seventeenth|eighteenth|nineteenth|twentieth)")
# Each pattern says what it refuses; a technical sense of the same word (a lane's first round of a
# claim pass, a round trip, a web session) does not match.
PATTERNS = {
    "an issue number": re.compile(r"\bissues?\s+#?\d+", re.I),
    "a round of work": re.compile(r"\bthis round\b(?!\s+(?:trip|of renewals))|\bthe round's\b|\bround\s+(?:one|two|three|four|five|six|\d+)\b"
                                  r"|\b(?:first|second|third|earlier|previous|last) round\)|\bround of (?:work|helpers)",
                                  re.I),
    "a working session": re.compile(rf"\bthis session\b|\b{_ORDINAL}\s+session\b", re.I),
    "a numbered fix": re.compile(rf"\b{_ORDINAL}\s+fix\b", re.I),
    "'previously'": re.compile(r"\bpreviously\b", re.I),
    "a commit hash": re.compile(r"`[0-9a-f]{7,12}`|\bcommit\s+[0-9a-f]{7,40}\b"
                                r"|\((?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,12}\)"),
}


def _text_files() -> list[Path]:
    listed = subprocess.run(["git", "ls-files", "README.md", "docs", "almanac", "bench", "tests"], cwd=ROOT,
                            capture_output=True, text=True, check=True).stdout.split()
    return [ROOT / name for name in listed
            if Path(name).suffix in SUFFIXES and name not in SKIP and (ROOT / name).is_file()]


def findings(text: str) -> list[str]:
    """Each line of `text` that names work history, with what it names."""
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        found += [f"{number}: {what}: {line.strip()[:120]}" for what, pattern in PATTERNS.items()
                  if pattern.search(line)]
    return found


def test_the_patterns_catch_history_and_spare_technical_words() -> None:
    history = ["see issue 51", "(issue 19)", "in round three", "this round's start", "this session",
               "the thirteenth session", "the twelfth fix", "as previously measured", "old (1d08738) and new",
               "at `0f9cb66`", "commit 2d88fcd7"]
    assert [line for line in history if not findings(line)] == []
    technical = ["a first round that caps every tenant", "pays for this round trip", "at this round of renewals", "the next round renews it",
                 "give the session a new id", "run #42", "sha256 of the body", "0x7fffffff"]
    assert [line for line in technical if findings(line)] == []


def test_no_file_names_issues_or_work_chronology() -> None:
    problems = [f"{path.relative_to(ROOT)}:{finding}" for path in _text_files()
                for finding in findings(path.read_text(errors="replace"))]
    assert problems == [], "\n".join(problems)
