"""Replace a tenant's secret values by `[secret NAME]` in what a run leaves behind (SPEC section 6).

Longer values first, so a secret that contains another is replaced whole. Values shorter than
`MIN_LENGTH` are not replaced: "1" or "a" would turn every log line into noise and hide nothing.
Works on any JSON-shaped value (strings inside lists and objects, keys included).
"""

from __future__ import annotations

import re
from typing import Any

MIN_LENGTH = 4


class Redactor:
    def __init__(self, secrets: dict[str, str]) -> None:
        pairs = sorted(((v, n) for n, v in secrets.items() if len(v) >= MIN_LENGTH), key=lambda p: -len(p[0]))
        self._names = {v: n for v, n in reversed(pairs)}
        self._pattern = re.compile("|".join(re.escape(v) for v, _ in pairs)) if pairs else None

    def __bool__(self) -> bool:
        return self._pattern is not None

    def text(self, value: str) -> str:
        if self._pattern is None:
            return value
        return self._pattern.sub(lambda m: f"[secret {self._names[m.group(0)]}]", value)

    def value(self, value: Any) -> Any:
        """A JSON-shaped value with every string redacted (the same shape back)."""
        if self._pattern is None:
            return value
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, list):
            return [self.value(v) for v in value]
        if isinstance(value, dict):
            return {self.text(k) if isinstance(k, str) else k: self.value(v) for k, v in value.items()}
        return value
