"""What text and JSON Almanac accepts, decided once (STYLE: "boundaries validate once").

Everything from outside - API bodies, and what scripts hand back (output, errors, logs,
kv keys and values, emitted events, job keys and payloads) - is checked here before it
can reach a row that every later read must serialise:

- text is valid Unicode scalar values: no lone surrogates (they cannot be encoded as
  UTF-8, so a row holding one breaks every answer that includes it), and no U+0000
  (PostgreSQL's text and jsonb cannot hold it; SQLite can, so without this rule the
  same input would be stored on one backend and a server error on the other). The rule
  holds inside JSON too, so data stays movable to jsonb and both backends agree;
  diagnostics (error messages, log lines) are repaired instead, with U+FFFD;
- JSON nests at most `MAX_DEPTH` (64) arrays/objects deep;
- integers fit in 64 signed bits, floats are finite;
- ids (`parse_id`, `ID_MAX`) fit the store's INTEGER keys, 31 bits plus sign: PostgreSQL's
  `integer` refuses a larger number even in a comparison, where SQLite merely finds no row;
- sizes are measured in UTF-8 bytes of the JSON as stored (`dumps`).

A leaf: imports nothing of almanac, so every part may use it.
"""

from __future__ import annotations

import json
import math
import re
from datetime import datetime, timedelta, timezone
from typing import Any

MAX_DEPTH = 64
INT_MIN, INT_MAX = -(2**63), 2**63 - 1
# The largest id the store can hold (PostgreSQL `integer`): a larger number names no row on either backend.
ID_MAX = 2**31 - 1
TEXT_CAP = 64 * 1024  # error messages and the like, as output and logs
TRUNCATED = "\n[truncated]"
# Dates: at least a day inside datetime's range, so no offset (at most +-24 h) can push them out.
DATE_MIN = datetime(1, 1, 2, tzinfo=timezone.utc)
DATE_MAX = datetime(9999, 12, 30, tzinfo=timezone.utc)
# What text may not hold: lone surrogates and U+0000 (see the module doc).
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


class Unsafe(ValueError):
    """The value is not text or JSON that Almanac stores; the message says where and why."""


def check_text(text: str, what: str = "text") -> str:
    found = _UNSTORABLE.search(text)
    if found is None:
        return text
    if found.group() == "\x00":
        raise Unsafe(f"{what} holds U+0000 (NUL) at character {found.start()}; text may not contain it")
    raise Unsafe(f"{what} holds a lone surrogate (U+{ord(found.group()):04X}) at character {found.start()}; "
                 "text must be valid Unicode")


def check(value: Any, what: str = "value") -> Any:
    """`value` unchanged if it is safe JSON (see the module doc), else `Unsafe`."""
    stack: list[tuple[Any, int, str]] = [(value, 0, what)]
    while stack:
        item, depth, where = stack.pop()
        if item is None or isinstance(item, bool):
            continue
        if isinstance(item, int):
            if not INT_MIN <= item <= INT_MAX:
                raise Unsafe(f"{where} is an integer outside 64 bits")
        elif isinstance(item, float):
            if not math.isfinite(item):
                raise Unsafe(f"{where} is not a finite number")
        elif isinstance(item, str):
            check_text(item, where)
        elif isinstance(item, (list, tuple, dict)):
            if depth >= MAX_DEPTH:
                raise Unsafe(f"{what} nests deeper than {MAX_DEPTH} levels")
            if isinstance(item, dict):
                for key, child in item.items():
                    if not isinstance(key, str):
                        raise Unsafe(f"{where} has a key that is not a string")
                    check_text(key, f"a key of {where}")
                    stack.append((child, depth + 1, where))
            else:
                stack.extend((child, depth + 1, where) for child in item)
        else:
            raise Unsafe(f"{where} is not JSON ({type(item).__name__})")
    return value


# One encoder, not one a call (`json.dumps` with options builds a JSONEncoder each time: a batch
# of 1,000 jobs encodes 2,000 payloads).
_COMPACT = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def dumps(value: Any, what: str = "value", limit: int | None = None) -> str:
    """The stored JSON text of a safe value; `Unsafe` if it is not safe or over `limit` UTF-8 bytes."""
    check(value, what)
    text = _COMPACT.encode(value)
    if limit is not None:
        size = len(text.encode())
        if size > limit:
            raise Unsafe(f"{what} is {size} bytes of JSON, over the {limit // 1024} KiB limit")
    return text


def loads_stored(text: str) -> Any:
    """Stored JSON for an answer. Rows written before these rules may break them; such a value is
    served repaired (lone surrogates and U+0000 as U+FFFD) or, failing that, as its JSON text: a read never fails."""
    value = json.loads(text)
    try:
        return check(value)
    except Unsafe:
        pass
    try:
        return check(_repaired(value, 0))
    except Unsafe:
        return clean_text(text)


def _repaired(value: Any, depth: int) -> Any:
    if depth > MAX_DEPTH:
        raise Unsafe("too deep to repair")
    if isinstance(value, str):
        return _UNSTORABLE.sub("\ufffd", value)
    if isinstance(value, list):
        return [_repaired(item, depth + 1) for item in value]
    if isinstance(value, dict):
        return {_UNSTORABLE.sub("\ufffd", k): _repaired(v, depth + 1) for k, v in value.items()}
    return value


def clean_text(text: str, cap: int = TEXT_CAP) -> str:
    """Diagnostic text (an error message, a log line) made storable: lone surrogates and U+0000 become U+FFFD and
    text over `cap` UTF-8 bytes is cut, ending with "[truncated]"."""
    text = _UNSTORABLE.sub("\ufffd", text)
    data = text.encode()
    if len(data) <= cap:
        return text
    keep = cap - len(TRUNCATED.encode())
    return data[:keep].decode("utf-8", "ignore") + TRUNCATED


def check_instant(value: datetime, what: str = "date-time", *, need_offset: bool = False) -> datetime:
    """A date-time that stays inside the calendar whatever offset or time zone later applies to it."""
    if value.tzinfo is None:
        if need_offset:
            raise Unsafe(f"{what} needs an offset or Z, e.g. 2026-12-01T09:00:00Z")
        probe = value.replace(tzinfo=timezone.utc)
    else:
        try:
            probe = value.astimezone(timezone.utc)
        except (OverflowError, ValueError):
            raise Unsafe(f"{what} is outside the years 1 to 9999 once its offset applies") from None
        offset = value.utcoffset()
        if offset is not None and abs(offset) >= timedelta(days=1):
            raise Unsafe(f"{what} has an offset of a day or more")
    if not DATE_MIN <= probe <= DATE_MAX:
        raise Unsafe(f"{what} must lie between {DATE_MIN:%Y-%m-%d} and {DATE_MAX:%Y-%m-%d}")
    return value


def parse_id(text: str) -> int | None:
    """An id as the API accepts it (decimal digits, at most `ID_MAX`), else None (the API's 404 in a path)."""
    if not text.isascii() or not text.isdigit() or len(text) > 10:
        return None
    number = int(text)
    return number if number <= ID_MAX else None
