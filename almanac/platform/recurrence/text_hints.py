"""What a refusal of an English rule says: the words it could not use, and the nearest phrasing
the grammar accepts, rewritten from the person's own words.

A suggestion is only ever a phrase the reader accepted whole: candidates are made by mending
spelling (each unknown word to the nearest word the grammar knows) and by putting common word
orders into the grammar's ("last friday every month" -> "the last Friday of every month"),
then each is read; the first one read whole is offered. No fixed list of examples is shown.
"""

from __future__ import annotations

import difflib
import re
from functools import lru_cache
from typing import Callable

from almanac.errors import InvalidRule

from .words import DAY_NAMES, MONTH_NAMES, ORDINAL_RE

_KEYWORDS = (
    "every each other on at the of in and to from until through between during except starting "
    "day days week weeks month months year years hour hours minute minutes second seconds "
    "weekday weekdays weekend weekends business holidays public times once twice daily weekly "
    "monthly yearly hourly quarterly annually fortnightly fortnight quarter noon midnight am pm "
    "first third fourth fifth last only occurrence occurrences before after next previous "
    "january february march april may june july august september october november december"
).split()
VOCABULARY = frozenset(_KEYWORDS) | frozenset(DAY_NAMES) | {d + "s" for d in DAY_NAMES} \
    | frozenset(MONTH_NAMES)
_DAY = "(?:" + "|".join(DAY_NAMES) + ")"
_ORD = ORDINAL_RE
# Word orders people type, put into the grammar's; tried in order on the mended phrase.
_REORDERS = (
    (rf"^(?:on )?(?:the )?({_ORD}) ({_DAY})s? (?:of |in )?(?:every|each|a) month",
     r"the \1 \2 of every month"),
    (rf"^(?:on )?(?:the )?({_ORD})(?: day)? (?:of |in )?(?:every|each|a) month", r"the \1 of every month"),
    (rf"^({_DAY})s? (?:every|each) week", r"every \1"),
    (rf"^every (\d+) ({_DAY})s?", r"every \1 weeks on \2"),
    (r"\bat (\d{1,2})\.(\d{2})\b", r"at \1:\2"),
    (r"\bat (\d{1,2}) ?o'?clock\b", r"at \1"),
    (r"^(.+?),? (?:every|each) (year|month|week|day)$", r"every \2 \1"),
    (r"^(.+ business days?\b.*?) ((?:in|for) .+?) (at [^,;]+)$", r"\1 \3 \2"),  # calendar words last
)
_MAX_QUOTED = 60
MAX_HINTED_CHARS = 200


def with_hint(err: InvalidRule, text: str, accepts: Callable[[str], bool]) -> InvalidRule:
    """`err` saying which words it could not use and, where one is found, the phrasing meant."""
    details = err.details or {}
    start, length = int(details.get("position", 0)), int(details.get("length", len(text)))
    words = text[start:start + length].strip() or text.strip()
    if len(words) > _MAX_QUOTED:
        words = words[:_MAX_QUOTED - 1] + "…"
    reason = err.message
    if reason.startswith("Cannot understand '"):
        reason = ""  # the quoted words already say it
    # An ambiguous word has two readings: guessing one would be the silent guess the refusal avoids.
    hint = None if "ambiguous" in reason else suggest(text, start, length, accepts)
    if hint and reason.startswith("Cannot understand the rule:"):
        reason = ""  # the suggestion replaces the general advice
    message = f'Could not use "{words}"' + (f": {reason}" if reason else ".")
    if hint:
        message += f' Did you mean "{hint}"?'
    return InvalidRule(message, details=err.details)


def suggest(text: str, start: int, length: int, accepts: Callable[[str], bool]) -> str | None:
    """The nearest phrase `accepts` takes, from the person's words, or None. A phrase longer than
    anyone types as a rule gets none: mending each of 4 KiB of words would take the preview's time."""
    if len(text) > MAX_HINTED_CHARS:
        return None
    plain = " ".join(text.lower().split())
    mended = _mend_spelling(plain)
    candidates = [mended]
    for pattern, replacement in _REORDERS:
        candidates.append(re.sub(pattern, replacement, mended))
    reordered = mended
    for pattern, replacement in _REORDERS:
        reordered = re.sub(pattern, replacement, reordered)
    candidates.append(reordered)
    without = " ".join((text[:start] + " " + text[start + length:]).lower().split()).strip(" ,")
    stray = len(text[start:start + length].split()) == 1 and not text[start + length:].strip()
    if without and start > 0 and stray:
        candidates.append(without)  # one stray last word left out ("every day at 9 please")
    for candidate in dict.fromkeys(candidates):
        if candidate != plain and accepts(candidate):
            return _shown(candidate, text)
    return None


def _mend_spelling(text: str) -> str:
    out = []
    for word in text.split(" "):
        m = re.fullmatch(r"([a-z][a-z'-]*)([,.]?)", word)
        if m and m.group(1) not in VOCABULARY:
            word = _nearest(m.group(1)) + m.group(2)
        out.append(word)
    return " ".join(out)


@lru_cache(maxsize=1024)
def _nearest(word: str) -> str:
    near = difflib.get_close_matches(word, VOCABULARY, n=1, cutoff=0.75)
    return near[0] if near else word


def _shown(text: str, typed: str) -> str:
    """Day and month names capitalized, as `describe` writes them; other words as they were typed
    ("in Germany" stays "Germany")."""
    cases = {word.lower(): word for word in typed.split()}
    text = " ".join(cases.get(word, word) for word in text.split(" "))
    names = "|".join(DAY_NAMES + MONTH_NAMES)
    return re.sub(rf"\b({names})(s?)\b", lambda m: m.group(1).capitalize() + m.group(2), text,
                  flags=re.IGNORECASE)
