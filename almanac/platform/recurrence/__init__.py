"""The recurrence engine: parse rules in four forms into one canonical RFC 5545
block, describe them in English, list their next occurrences, and refuse
rules that never fire or fire too often. Pure: every function takes `now`.
Business calendars (`calendars.py`) say which days are business days;
`roll.py` keeps, skips or moves a rule's occurrences by one.

See `occurrences.py` for the DST behaviour and `api.py` for the DTSTART
choice; both are written for the README.
"""

from . import business
from .analysis import ensure_fires, ensure_min_interval
from .api import Preview, load, parse, preview
from .calendars import BusinessCalendar, is_business_day, why_not_business_day
from .describe import describe
from .model import Recurrence, Rule
from .occurrences import next_after, occurrences
from .roll import Rolled, ensure_fires_with_calendar, roll

__all__ = [
    "BusinessCalendar", "Preview", "business", "Recurrence", "Rolled", "Rule", "describe", "ensure_fires",
    "ensure_fires_with_calendar", "ensure_min_interval", "is_business_day", "load", "next_after",
    "occurrences", "parse", "preview", "roll", "why_not_business_day",
]
