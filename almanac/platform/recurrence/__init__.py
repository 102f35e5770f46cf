"""The recurrence engine: parse rules in four forms into one canonical RFC 5545
block, describe them in English, list their next occurrences, and refuse
rules that never fire or fire too often. Pure: every function takes `now`.

See `occurrences.py` for the DST behaviour and `api.py` for the DTSTART
choice; both are written for the README.
"""

from .analysis import ensure_fires, ensure_min_interval
from .api import Preview, load, parse, preview
from .describe import describe
from .model import Recurrence, Rule
from .occurrences import next_after, occurrences

__all__ = [
    "Preview", "Recurrence", "Rule", "describe", "ensure_fires", "ensure_min_interval",
    "load", "next_after", "occurrences", "parse", "preview",
]
