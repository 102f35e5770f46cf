"""Replace a tenant's secret values by `[secret NAME]` in what a run leaves behind (SPEC section 6).

The one redaction of everything a run stores: its output, logs and error, its fetch records, the
payloads of the jobs it plans and the data of the events it emits (`almanac.outbound`), and a
fetch's error text before it is cut to length (a value cut short is no longer found whole).

A value is looked for in every form it takes in stored text (`forms`): as itself; JSON-escaped
once or twice (a logged object, `JSON.stringify`, a JSON text inside another JSON text), with
non-ASCII as it is or as `\\uXXXX`; percent-encoded as `encodeURIComponent`, `encodeURI` and
Python's `quote` and `quote_plus` write it; hex digits in either case. Longer forms first, so a
secret that contains another is replaced whole. A `[secret NAME]` already in the text is left as
it is, so redacting twice changes nothing (a fetch error is redacted when it is made, and again
with the run's error that quotes it).

Every value is replaced, however short: new values under `store.VALUE_MIN` characters are refused
where they are set, and one stored before that rule must still never be shown.
Works on text, on JSON-shaped values (strings inside lists and objects, keys included) and on
stored JSON text (`json_text`).
"""

from __future__ import annotations

import functools
import json
import re
from typing import Any
from urllib.parse import quote

MARKER = re.compile(r"\[secret [A-Z][A-Z0-9_]{0,63}\]")
# Characters left as they are by: Python's quote (nothing, or "/" by default), encodeURIComponent,
# encodeURI; quote_plus, and the web's form encoding (URLSearchParams), write a space as "+".
_URL_SAFE = ("", "/", "!'()*", ";,/?:@&=+$#!'()*")
_FORM_SAFE = ("", "*")


def forms(value: str) -> set[str]:
    """Every way `value` is written in stored text (see the module doc); empty for an empty value.

    Built with C-speed string methods only (a tenant may keep a thousand 8 KiB values): one
    `quote`, from which the other percent-encodings are the same text with some escapes undone."""
    if not value:
        return set()
    found = {value}
    for _level in range(2):
        found |= {json.dumps(f, ensure_ascii=ascii_only)[1:-1] for f in found for ascii_only in (False, True)}
    encoded = quote(value, safe="")
    found |= {_undone(encoded, safe) for safe in _URL_SAFE}
    found |= {_undone(encoded, safe).replace("%20", "+") for safe in _FORM_SAFE}
    return found | {_hex_case(form, upper) for form in found for upper in (False, True)}


def _undone(encoded: str, safe: str) -> str:
    """Percent-encoded text with the escapes of `safe` characters undone (every "%" in it starts one)."""
    for char in safe:
        encoded = encoded.replace(f"%{ord(char):02X}", char)
    return encoded


def _hex_case(form: str, upper: bool) -> str:
    """`form` with the hex digits of its `%XX` and `\\uXXXX` escapes in one case."""
    for lead, digits in (("%", 2), ("\\u", 4)):
        if lead in form:
            head, *rest = form.split(lead)
            form = lead.join([head, *((r[:digits].upper() if upper else r[:digits].lower()) + r[digits:]
                                      for r in rest)])
    return form


@functools.lru_cache(maxsize=32)
def _compiled(secrets: tuple[tuple[str, str], ...]) -> tuple[tuple[str, str], ...]:
    """(form, name) of one set of secrets, longest form first (built once: a run's end is a hot path)."""
    names: dict[str, str] = {}
    for name, value in sorted(secrets, key=lambda pair: (-len(pair[1]), pair[0])):
        for form in forms(value):
            names.setdefault(form, name)
    return tuple(sorted(names.items(), key=lambda pair: (-len(pair[0]), pair[0])))


class Redactor:
    """One set of secrets' values, looked for with `str.find`, form by form.

    Not one regular expression of every form: compiling one for a tenant's thousand 8 KiB values
    takes minutes, and matching it tries every form at every position of the text, where `find`
    skips ahead by the length of what it looks for."""

    def __init__(self, secrets: dict[str, str]) -> None:
        self._forms = _compiled(tuple(sorted(secrets.items())))

    def __bool__(self) -> bool:
        return bool(self._forms)

    def text(self, value: str) -> str:
        spans = self._found(value)
        if not spans:
            return value
        spans.sort(key=lambda span: (span[0], -span[1]))  # leftmost first, then the longest there
        kept, k = _markers(value), 0
        parts, at = [], 0
        for start, end, name in spans:
            while k < len(kept) and kept[k][1] <= start:
                k += 1
            if end <= at or (k < len(kept) and kept[k][0] <= start and end <= kept[k][1]):
                continue  # inside what is replaced already, or inside a `[secret NAME]` of the text
            parts += [value[at:max(start, at)], f"[secret {name}]"]  # overlapping values: both named
            at = end
        parts.append(value[at:])
        return "".join(parts)

    def cut_text(self, value: str) -> str:
        """`text` of a text that was cut short before it could be redacted (the sandbox's own caps):
        what is left of a value at its very end, the start of one of its forms, is replaced too."""
        value = self.text(value)
        start, name = len(value), ""
        for form, owner in self._forms:
            tail = value[max(len(value) - len(form) + 1, 0):]
            at = tail.find(form[0])
            while at != -1 and len(value) - len(tail) + at < start:
                if form.startswith(tail[at:]):
                    start, name = len(value) - len(tail) + at, owner
                    break
                at = tail.find(form[0], at + 1)
        return value if not name else value[:start] + f"[secret {name}]"

    def _found(self, value: str) -> list[tuple[int, int, str]]:
        """(start, end, name) of every occurrence of every form (after one, the next is looked for
        past its end: a text of one repeated character stays linear work)."""
        spans = []
        for form, name in self._forms:
            at = value.find(form)
            while at != -1:
                spans.append((at, at + len(form), name))
                at = value.find(form, at + len(form))
        return spans

    def value(self, value: Any) -> Any:
        """A JSON-shaped value with every string redacted (the same shape back)."""
        if not self._forms:
            return value
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, list):
            return [self.value(v) for v in value]
        if isinstance(value, dict):
            return {self.text(k) if isinstance(k, str) else k: self.value(v) for k, v in value.items()}
        return value

    def json_text(self, stored: str) -> str:
        """Stored JSON text (a planned job's payload, an event's data) with its strings redacted.

        Redacted as parsed strings, never as text: a value's raw form may hold half of an escape
        sequence of the JSON around it. Unchanged, the very same text comes back; changed, it is
        written in the compact form the sandbox stores (`jsonsafe.dumps`)."""
        if not self._forms:
            return stored
        value = json.loads(stored)
        redacted = self.value(value)
        if redacted == value:
            return stored
        return json.dumps(redacted, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def _markers(value: str) -> list[tuple[int, int]]:
    """Where the text holds `[secret NAME]` already (redacted before): left as it is."""
    return [m.span() for m in MARKER.finditer(value)] if "[secret " in value else []
