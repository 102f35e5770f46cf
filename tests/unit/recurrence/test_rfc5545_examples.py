"""RFC 5545 section 3.8.5.3 examples: our expansion against the dates the RFC
lists (first few written out) and against python-dateutil for the rest."""

from __future__ import annotations

from datetime import datetime

import pytest
from dateutil.rrule import rrulestr

from almanac.platform.recurrence import load, occurrences

# (id, DTSTART in America/New_York, RRULE, first dates from the RFC text)
EXAMPLES = [
    ("daily-10", "19970902T090000", "FREQ=DAILY;COUNT=10", ["1997-09-02", "1997-09-03"]),
    ("daily-until", "19970902T090000", "FREQ=DAILY;UNTIL=19971224T000000Z", ["1997-09-02"]),
    ("every-other-day", "19970902T090000", "FREQ=DAILY;INTERVAL=2", ["1997-09-02", "1997-09-04"]),
    ("every-10-days-5", "19970902T090000", "FREQ=DAILY;INTERVAL=10;COUNT=5",
     ["1997-09-02", "1997-09-12", "1997-09-22", "1997-10-02", "1997-10-12"]),
    ("january-every-day-yearly", "19980101T090000",
     "FREQ=YEARLY;UNTIL=20000131T140000Z;BYMONTH=1;BYDAY=SU,MO,TU,WE,TH,FR,SA", ["1998-01-01"]),
    ("january-every-day-daily", "19980101T090000", "FREQ=DAILY;UNTIL=20000131T140000Z;BYMONTH=1",
     ["1998-01-01"]),
    ("weekly-10", "19970902T090000", "FREQ=WEEKLY;COUNT=10", ["1997-09-02", "1997-09-09"]),
    ("weekly-until", "19970902T090000", "FREQ=WEEKLY;UNTIL=19971224T000000Z", ["1997-09-02"]),
    ("every-other-week", "19970902T090000", "FREQ=WEEKLY;INTERVAL=2;WKST=SU", ["1997-09-02", "1997-09-16"]),
    ("tue-thu-5-weeks", "19970902T090000", "FREQ=WEEKLY;UNTIL=19971007T000000Z;WKST=SU;BYDAY=TU,TH",
     ["1997-09-02", "1997-09-04", "1997-09-09"]),
    ("mwf-every-other-week", "19970901T090000",
     "FREQ=WEEKLY;INTERVAL=2;UNTIL=19971224T000000Z;WKST=SU;BYDAY=MO,WE,FR",
     ["1997-09-01", "1997-09-03", "1997-09-05", "1997-09-15"]),
    ("tue-thu-every-other-week-8", "19970902T090000",
     "FREQ=WEEKLY;INTERVAL=2;COUNT=8;WKST=SU;BYDAY=TU,TH", ["1997-09-02", "1997-09-04", "1997-09-16"]),
    ("first-friday-10", "19970905T090000", "FREQ=MONTHLY;COUNT=10;BYDAY=1FR", ["1997-09-05", "1997-10-03"]),
    ("first-friday-until", "19970905T090000", "FREQ=MONTHLY;UNTIL=19971224T000000Z;BYDAY=1FR",
     ["1997-09-05", "1997-10-03", "1997-11-07", "1997-12-05"]),
    ("first-and-last-sunday", "19970907T090000", "FREQ=MONTHLY;INTERVAL=2;COUNT=10;BYDAY=1SU,-1SU",
     ["1997-09-07", "1997-09-28", "1997-11-02", "1997-11-30"]),
    ("second-last-monday", "19970922T090000", "FREQ=MONTHLY;COUNT=6;BYDAY=-2MO",
     ["1997-09-22", "1997-10-20", "1997-11-17"]),
    ("third-last-day", "19970928T090000", "FREQ=MONTHLY;BYMONTHDAY=-3", ["1997-09-28", "1997-10-29"]),
    ("2nd-and-15th", "19970902T090000", "FREQ=MONTHLY;COUNT=10;BYMONTHDAY=2,15",
     ["1997-09-02", "1997-09-15", "1997-10-02"]),
    ("first-and-last-day", "19970930T090000", "FREQ=MONTHLY;COUNT=10;BYMONTHDAY=1,-1",
     ["1997-09-30", "1997-10-01", "1997-10-31"]),
    ("10th-to-15th-every-18-months", "19970910T090000",
     "FREQ=MONTHLY;INTERVAL=18;COUNT=10;BYMONTHDAY=10,11,12,13,14,15",
     ["1997-09-10", "1997-09-11", "1997-09-12"]),
    ("every-tuesday-every-other-month", "19970902T090000", "FREQ=MONTHLY;INTERVAL=2;BYDAY=TU",
     ["1997-09-02", "1997-09-09", "1997-09-16"]),
    ("june-july-10", "19970610T090000", "FREQ=YEARLY;COUNT=10;BYMONTH=6,7", ["1997-06-10", "1997-07-10"]),
    ("jan-feb-mar-every-other-year", "19970310T090000",
     "FREQ=YEARLY;INTERVAL=2;COUNT=10;BYMONTH=1,2,3", ["1997-03-10", "1999-01-10"]),
    ("yeardays-every-3-years", "19970101T090000", "FREQ=YEARLY;INTERVAL=3;COUNT=10;BYYEARDAY=1,100,200",
     ["1997-01-01", "1997-04-10", "1997-07-19", "2000-01-01"]),
    ("20th-monday", "19970519T090000", "FREQ=YEARLY;BYDAY=20MO", ["1997-05-19", "1998-05-18"]),
    ("monday-week-20", "19970512T090000", "FREQ=YEARLY;BYWEEKNO=20;BYDAY=MO",
     ["1997-05-12", "1998-05-11", "1999-05-17"]),
    ("thursdays-in-march", "19970313T090000", "FREQ=YEARLY;BYMONTH=3;BYDAY=TH",
     ["1997-03-13", "1997-03-20", "1997-03-27", "1998-03-05"]),
    ("thursdays-in-summer", "19970605T090000", "FREQ=YEARLY;BYDAY=TH;BYMONTH=6,7,8", ["1997-06-05"]),
    ("friday-13th", "19970902T090000", "FREQ=MONTHLY;BYDAY=FR;BYMONTHDAY=13",
     ["1998-02-13", "1998-03-13", "1998-11-13"]),
    ("first-saturday-after-first-sunday", "19970913T090000",
     "FREQ=MONTHLY;BYDAY=SA;BYMONTHDAY=7,8,9,10,11,12,13", ["1997-09-13", "1997-10-11"]),
    ("us-election-day", "19961105T090000",
     "FREQ=YEARLY;INTERVAL=4;BYMONTH=11;BYDAY=TU;BYMONTHDAY=2,3,4,5,6,7,8",
     ["1996-11-05", "2000-11-07", "2004-11-02"]),
    ("third-tue-wed-thu", "19970904T090000", "FREQ=MONTHLY;COUNT=3;BYDAY=TU,WE,TH;BYSETPOS=3",
     ["1997-09-04", "1997-10-07", "1997-11-06"]),
    ("second-last-weekday", "19970929T090000", "FREQ=MONTHLY;BYDAY=MO,TU,WE,TH,FR;BYSETPOS=-2",
     ["1997-09-29", "1997-10-30", "1997-11-27"]),
    ("every-3-hours", "19970902T090000", "FREQ=HOURLY;INTERVAL=3;UNTIL=19970902T170000Z", ["1997-09-02"]),
    ("every-15-minutes-6", "19970902T090000", "FREQ=MINUTELY;INTERVAL=15;COUNT=6", ["1997-09-02"]),
    ("every-hour-and-a-half-4", "19970902T090000", "FREQ=MINUTELY;INTERVAL=90;COUNT=4", ["1997-09-02"]),
    ("every-20-minutes-9-to-5-daily", "19970902T090000",
     "FREQ=DAILY;BYHOUR=9,10,11,12,13,14,15,16;BYMINUTE=0,20,40", ["1997-09-02"]),
    ("every-20-minutes-9-to-5-minutely", "19970902T090000",
     "FREQ=MINUTELY;INTERVAL=20;BYHOUR=9,10,11,12,13,14,15,16", ["1997-09-02"]),
    ("wkst-mo", "19970805T090000", "FREQ=WEEKLY;INTERVAL=2;COUNT=4;BYDAY=TU,SU;WKST=MO",
     ["1997-08-05", "1997-08-10", "1997-08-19", "1997-08-24"]),
    ("wkst-su", "19970805T090000", "FREQ=WEEKLY;INTERVAL=2;COUNT=4;BYDAY=TU,SU;WKST=SU",
     ["1997-08-05", "1997-08-17", "1997-08-19", "1997-08-31"]),
    ("feb-30-skipped", "20070115T090000", "FREQ=MONTHLY;BYMONTHDAY=15,30;COUNT=5",
     ["2007-01-15", "2007-01-30", "2007-02-15", "2007-03-15", "2007-03-30"]),
]


@pytest.mark.parametrize(("start", "rule", "first"), [e[1:] for e in EXAMPLES],
                         ids=[e[0] for e in EXAMPLES])
def test_rfc_example(start: str, rule: str, first: list[str]) -> None:
    rec = load(f"DTSTART;TZID=America/New_York:{start}\nRRULE:{rule}")
    got = occurrences(rec, after=rec.dtstart, count=40)
    assert [d.date().isoformat() for d in got[: len(first)]] == first
    wall = [d.replace(tzinfo=None) for d in got]
    assert wall == _dateutil(start, rule, len(wall))


def _dateutil(start: str, rule: str, count: int) -> list[datetime]:
    # UNTIL is UTC in the RFC text; dateutil wants it naive like DTSTART here
    # (New York is UTC-4/-5, so a naive UTC UNTIL keeps the same dates).
    rule = rule.replace("Z", "")
    found = rrulestr(f"DTSTART:{start}\nRRULE:{rule}")
    out = []
    for when in found:
        out.append(when)
        if len(out) >= count:
            break
    return out
