"""Business calendars: which days are business days, and why the others are not.

A calendar is the public holidays of one country (and optional subdivision)
from the `holidays` library, the tenant's own closed dates and ranges, and
the weekdays that make the weekend. It is a value: stored as versioned JSON,
checked once where it enters (`from_json`), then asked per day.

The holiday library covers each country for a range of years only. A day
outside that range is never treated as a day without holidays:
`why_not_business_day` raises `HolidaysUnknown` naming the year.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field
from datetime import date
from functools import lru_cache
from types import MappingProxyType
from typing import Any, Mapping

import holidays
import holidays.registry

from almanac.errors import HolidaysUnknown, ValidationError

VERSION = 1
WEEKDAY_NAMES = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
DEFAULT_WEEKEND = frozenset({5, 6})
MAX_CLOSED = 500
MAX_LABEL = 100
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


@dataclass(frozen=True, order=True)
class ClosedDays:
    """The tenant's own closed days: `first` to `last`, both included."""

    first: date
    last: date
    label: str = "closed"

    def covers(self, day: date) -> bool:
        return self.first <= day <= self.last


@dataclass(frozen=True)
class BusinessCalendar:
    """A named calendar. `weekend` holds weekday numbers (0 = Monday)."""

    name: str
    country: str | None = None
    subdivision: str | None = None
    closed: tuple[ClosedDays, ...] = ()
    weekend: frozenset[int] = field(default=DEFAULT_WEEKEND)

    def to_json(self) -> dict[str, Any]:
        return {
            "version": VERSION,
            "name": self.name,
            "country": self.country,
            "subdivision": self.subdivision,
            "weekend": [WEEKDAY_NAMES[d] for d in sorted(self.weekend)],
            "closed": [{"from": c.first.isoformat(), "to": c.last.isoformat(), "label": c.label}
                       for c in self.closed],
        }

    @classmethod
    def from_json(cls, data: Any) -> BusinessCalendar:
        """The calendar `data` describes, or ValidationError saying what is wrong."""
        if not isinstance(data, dict):
            raise _invalid("A calendar is a JSON object.", "calendar")
        if data.get("version", VERSION) != VERSION:
            raise _invalid(f"Calendar version {repr(data.get('version'))[:20]} is not known; "
                           f"this server reads version {VERSION}.", "version")
        country, subdivision = _place(data.get("country"), data.get("subdivision"))
        return cls(
            name=_name(data.get("name")),
            country=country,
            subdivision=subdivision,
            closed=_closed(data.get("closed", [])),
            weekend=_weekend(data.get("weekend", [WEEKDAY_NAMES[d] for d in DEFAULT_WEEKEND])),
        )


def _invalid(message: str, field_name: str) -> ValidationError:
    return ValidationError(message, details={"field": field_name})


def _name(value: Any) -> str:
    if not isinstance(value, str) or not _NAME.match(value):
        raise _invalid("A calendar's name is 1 to 64 letters, digits, '.', '_' or '-', "
                       "starting with a letter or digit.", "name")
    return value


def _place(country: Any, subdivision: Any) -> tuple[str | None, str | None]:
    """Country and subdivision as the holiday library names them, or ValidationError."""
    if country is None:
        if subdivision is not None:
            raise _invalid("A subdivision needs a country.", "subdivision")
        return None, None
    supported = holidays.list_supported_countries()
    if not isinstance(country, str) or country.upper() not in supported:
        shown = str(country)[:20]
        raise _invalid(f"{shown!r} is not a country the holiday library knows; use an "
                       "ISO 3166 code such as DE, US or GB.", "country")
    country = country.upper()
    if subdivision is None:
        return country, None
    known = {str(s).upper(): str(s) for s in supported[country]}
    if not isinstance(subdivision, str) or subdivision.upper() not in known:
        shown = str(subdivision)[:20]
        some = ", ".join(list(known.values())[:8]) or "none"
        raise _invalid(f"{shown!r} is not a subdivision of {country} the holiday library "
                       f"knows (some it knows: {some}).", "subdivision")
    return country, known[subdivision.upper()]


def _weekend(value: Any) -> frozenset[int]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise _invalid("weekend is a list of weekday names such as [\"saturday\", \"sunday\"].",
                       "weekend")
    days = set()
    for v in value:
        if v.lower() not in WEEKDAY_NAMES:
            raise _invalid(f"{v[:20]!r} is not a weekday name (monday ... sunday).", "weekend")
        days.add(WEEKDAY_NAMES.index(v.lower()))
    if len(days) == 7:
        raise _invalid("A weekend of all seven days leaves no business day.", "weekend")
    return frozenset(days)


def _closed(value: Any) -> tuple[ClosedDays, ...]:
    if not isinstance(value, list) or len(value) > MAX_CLOSED:
        raise _invalid(f"closed is a list of at most {MAX_CLOSED} dates or ranges.", "closed")
    return tuple(sorted(_closed_one(item) for item in value))


def _closed_one(item: Any) -> ClosedDays:
    """One entry: {"from", "to"?, "label"?}; a single date has no "to"."""
    if not isinstance(item, dict) or "from" not in item:
        raise _invalid('Each closed entry is {"from": "YYYY-MM-DD", "to"?, "label"?}.', "closed")
    first = _date(item["from"])
    last = _date(item.get("to", item["from"]))
    if last < first:
        raise _invalid(f"The closed range {first} to {last} ends before it starts.", "closed")
    label = item.get("label", "closed")
    if not isinstance(label, str) or not 0 < len(label) <= MAX_LABEL:
        raise _invalid(f"A closed entry's label is 1 to {MAX_LABEL} characters.", "closed")
    # Labels are shown in pages and stored as text: PostgreSQL refuses NUL, and a lone
    # surrogate or control character cannot be written out as the person meant it.
    if any(ord(c) < 32 or 0xD800 <= ord(c) <= 0xDFFF for c in label):
        raise _invalid("A closed entry's label is plain text, without control characters.", "closed")
    return ClosedDays(first, last, label)


def _date(value: Any) -> date:
    try:
        if isinstance(value, str) and len(value) == 10:
            return date.fromisoformat(value)
    except ValueError:
        pass
    raise _invalid(f"{str(value)[:20]!r} is not a date of the form YYYY-MM-DD.", "closed")


# ---------------------------------------------------------------- asking per day


@lru_cache(maxsize=256)
def _coverage(country: str) -> tuple[int, int]:
    """The first and last year the library has `country`'s holidays for."""
    table = holidays.country_holidays(country)
    return int(table.start_year), int(table.end_year)


@lru_cache(maxsize=1024)
def _holidays_of(country: str, subdivision: str | None, year: int) -> Mapping[date, str]:
    """The year's public holidays (observed days included, as the library gives them)."""
    table = holidays.country_holidays(country, subdiv=subdivision, years=year,
                                      language=_english(country))
    return MappingProxyType({d: "; ".join(table.get_list(d)) for d in table})


@lru_cache(maxsize=256)
def _english(country: str) -> str | None:
    # Reasons shown to people read best in one language; a country without
    # an English translation keeps the library's default language.
    languages = holidays.country_holidays(country).supported_languages
    return "en_US" if "en_US" in languages else None


def why_not_business_day(cal: BusinessCalendar, day: date) -> str | None:
    """None for a business day, else why not: the holiday's name, the closed entry's
    label, or "weekend", in that order (a holiday says more than "weekend").

    Raises HolidaysUnknown for a day in a year the holiday library does not cover
    for the calendar's country, unless a closed entry or the weekend excludes it anyway.
    """
    unknown: HolidaysUnknown | None = None
    if cal.country is not None:
        first, last = _coverage(cal.country)
        if first <= day.year <= last:
            holiday = _holidays_of(cal.country, cal.subdivision, day.year).get(day)
            if holiday:
                return holiday
        else:
            unknown = HolidaysUnknown(
                f"Public holidays of {place(cal)} are unknown for {day.year}: the holiday "
                f"library covers {first} to {last}.",
                details={"calendar": cal.name, "year": day.year},
            )
    for entry in cal.closed:
        if entry.covers(day):
            return entry.label
    if day.weekday() in cal.weekend:
        return "weekend"
    if unknown is not None:
        raise unknown
    return None


def is_business_day(cal: BusinessCalendar, day: date) -> bool:
    """True if `day` is a business day of `cal` (HolidaysUnknown outside the library's years)."""
    return why_not_business_day(cal, day) is None


def place(cal: BusinessCalendar) -> str:
    """The calendar's country as people write it: "DE-BY", "US"."""
    if cal.country is None:
        return "no country"
    return f"{cal.country}-{cal.subdivision}" if cal.subdivision else cal.country


# ---------------------------------------------------------------- places named in English

# English names of subdivisions where the library knows them only in their own language
# (its aliases for Germany are "Bayern", "Hessen"...); other countries' aliases are English.
_ENGLISH_SUBDIVISIONS = {
    "DE": {"bavaria": "BY", "hesse": "HE", "lower saxony": "NI", "north rhine-westphalia": "NW",
           "rhineland-palatinate": "RP", "saxony": "SN", "saxony-anhalt": "ST", "thuringia": "TH",
           "mecklenburg-western pomerania": "MV", "baden-wurttemberg": "BW"},
}


def _plain(text: str) -> str:
    """Lower case without accents, one space: "Baden-Württemberg" -> "baden-wurttemberg"."""
    flat = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    return " ".join(flat.lower().replace("_", " ").split()).removeprefix("the ")


@lru_cache(maxsize=1)
def _country_names() -> Mapping[str, str]:
    """English country name, ISO alpha-2 and alpha-3 code -> alpha-2 code, as the library lists them."""
    names: dict[str, str] = {}
    for module, (_cls, code, alpha3, *_rest) in holidays.registry.COUNTRIES.items():
        names.update({_plain(module): code, code.lower(): code, alpha3.lower(): code})
    names.update({"usa": "US", "us": "US", "uk": "GB", "britain": "GB", "great britain": "GB"})
    return MappingProxyType(names)


def _subdivision(country: str, words: str) -> str | None:
    entity = holidays.country_holidays(country)
    codes = {str(s).lower(): str(s) for s in entity.subdivisions}
    aliases = {_plain(k): str(v) for k, v in getattr(entity, "subdivisions_aliases", {}).items()}
    aliases.update(_ENGLISH_SUBDIVISIONS.get(country, {}))
    return codes.get(words) or aliases.get(words)


def place_code(words: str) -> str | None:
    """The holiday place English names, as a calendar's code: "Germany" -> "DE",
    "Bavaria, Germany" and "de-by" -> "DE-BY"; None when the words name no place."""
    text = _plain(words)
    code = re.fullmatch(r"([a-z]{2})-([a-z0-9]{1,4})", text)
    if code:
        country = _country_names().get(code.group(1))
        sub = _subdivision(country, code.group(2)) if country else None
        return f"{country}-{sub}" if country and sub else None
    region, _, country_words = text.rpartition(", ")
    country = _country_names().get(country_words)
    if country is None:
        return None
    if not region:
        return country
    sub = _subdivision(country, region)
    return f"{country}-{sub}" if sub else None
