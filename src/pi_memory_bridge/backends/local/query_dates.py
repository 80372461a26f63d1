"""The dates a query names, as time windows (pure): "in May 2023", "on 8 May, 2023",
"September 8, 2023", "2023-05-08", "2023年5月", "in February", "on March 12", 三月底,
"yesterday", "last week".

People ask about what happened when ("What did John host for the veterans in May 2023?"); a
turn said in that window is more likely the one meant, so L0 ranks it higher among the turns
that match the query anyway (backends/local/semantic.py; a date alone never makes a turn
relevant). What happened on a day is often told days later ("we had a party last week"), so a
named date's window reaches `TOLD_AFTER` past its end and `TOLD_BEFORE` before it; a relative
one ("yesterday") is the time of the talk itself. Calendar dates are read in the local time zone.
"""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass
from datetime import datetime, time, timedelta, tzinfo

TOLD_BEFORE = timedelta(days=3)
TOLD_AFTER = timedelta(days=21)

_MONTHS = {name.casefold(): i for i, name in enumerate(calendar.month_name) if name}
_MONTHS |= {name.casefold(): i for i, name in enumerate(calendar.month_abbr) if name}
_MONTHS["sept"] = 9
_MONTH = "|".join(sorted(_MONTHS, key=len, reverse=True))
_DAY = r"(\d{1,2})(?:st|nd|rd|th)?"
_YEAR = r"((?:19|20)\d\d)"
_NAMED = re.compile(
    rf"\b(?:{_DAY}\s+(?:of\s+)?)?({_MONTH})\.?(?:\s+{_DAY})?,?\s+{_YEAR}\b"  # 8 May, 2023 / May 8th 2023
    rf"|\b{_YEAR}-(\d{{1,2}})(?:-(\d{{1,2}}))?\b"  # 2023-05-08 / 2023-05
    rf"|{_YEAR}\s*年\s*(\d{{1,2}})\s*月(?:\s*(\d{{1,2}})\s*[日号])?"  # 2023年5月8日
    rf"|\b(?:in|during|of|since)\s+{_YEAR}\b",  # in 2023
    re.IGNORECASE,
)
# a month without its year is the last one that began by now: "in February", "on March 12",
# "early April", 二月份, 三月底, 4月
_CN_MONTHS = "一 二 三 四 五 六 七 八 九 十 十一 十二".split()
_CN_MONTH = "|".join(sorted(_CN_MONTHS, key=len, reverse=True))
_YEARLESS = re.compile(
    rf"\b(?:in|during|since|early|mid|late|end of|start of|beginning of|on|by|before|after|around)[\s-]+"
    rf"(?:{_DAY}\s+(?:of\s+)?)?({_MONTH})\b\.?(?:\s+{_DAY}\b)?(?!,?\s+(?:19|20)\d\d)"  # in May / on May 4
    rf"|\b({_MONTH})\.?\s+{_DAY}\b(?!,?\s+(?:19|20)\d\d)"  # March 12
    rf"|(?<![\d年])({_CN_MONTH}|\d{{1,2}})\s*月(?:份)?",  # 二月份, 三月底, 4月
    re.IGNORECASE,
)
_RELATIVE = {
    "today": (0, 1),
    "yesterday": (-1, 0),
    "this week": (-7, 1),
    "last week": (-14, 0),
    "last month": (-62, 0),
    "今天": (0, 1),
    "昨天": (-1, 0),
    "这周": (-7, 1),
    "本周": (-7, 1),
    "上周": (-14, 0),
    "上个月": (-62, 0),
}
_RELATIVE_RE = re.compile(
    "|".join(rf"\b{re.escape(k)}\b" if k.isascii() else re.escape(k) for k in _RELATIVE), re.IGNORECASE
)


@dataclass(frozen=True, slots=True)
class Window:
    start: datetime  # inclusive, aware
    end: datetime  # exclusive, aware

    def holds(self, moment: datetime) -> bool:
        return self.start <= moment < self.end


def _day(year: int, month: int, day: int, zone: tzinfo) -> datetime | None:
    try:
        return datetime(year, month, day, tzinfo=zone)
    except ValueError:  # 31 February, month 13: no date, no window
        return None


def _calendar(year: int, month: int | None, day: int | None, zone: tzinfo) -> Window | None:
    if month is None:
        start, end = _day(year, 1, 1, zone), _day(year + 1, 1, 1, zone)
    elif day is None:
        start = _day(year, month, 1, zone)
        end = _day(year + month // 12, month % 12 + 1, 1, zone) if 1 <= month <= 12 else None
    else:
        start = _day(year, month, day, zone)
        end = start + timedelta(days=1) if start is not None else None
    if start is None or end is None:
        return None
    return Window(start - TOLD_BEFORE, end + TOLD_AFTER)


def _int(text: str | None) -> int | None:
    return int(text) if text else None


def date_windows(query: str, now: datetime) -> list[Window]:
    """The windows of every date `query` names (`now`: aware, for "yesterday" and its zone)."""
    zone = now.tzinfo
    assert zone is not None, "now must be time-zone aware"
    windows: list[Window] = []
    for m in _NAMED.finditer(query):
        g = m.groups()
        found: Window | None
        if g[1] is not None:  # a month's name
            day = _int(g[0]) or _int(g[2])
            found = _calendar(int(g[3]), _MONTHS[g[1].casefold().rstrip(".")], day, zone)
        elif g[4] is not None:
            found = _calendar(int(g[4]), int(g[5]), _int(g[6]), zone)
        elif g[7] is not None:
            found = _calendar(int(g[7]), int(g[8]), _int(g[9]), zone)
        else:
            found = _calendar(int(g[10]), None, None, zone)
        if found is not None:
            windows.append(found)
    for m in _YEARLESS.finditer(_NAMED.sub(" ", query)):  # "May 8" of "May 8, 2023" is named already
        g = m.groups()
        if g[1] is not None:
            month, day = _MONTHS[g[1].casefold().rstrip(".")], _int(g[0]) or _int(g[2])
        elif g[3] is not None:
            month, day = _MONTHS[g[3].casefold().rstrip(".")], _int(g[4])
        else:
            month, day = (_CN_MONTHS.index(g[5]) + 1 if g[5] in _CN_MONTHS else int(g[5])), None
        year = now.year if (month, day or 1) <= (now.month, now.day) else now.year - 1
        found = _calendar(year, month, day, zone)
        if found is not None:
            windows.append(found)
    midnight = datetime.combine(now.date(), time(), tzinfo=zone)
    for m in _RELATIVE_RE.finditer(query):
        first, last = _RELATIVE[m.group(0).casefold()]
        windows.append(Window(midnight + timedelta(days=first), midnight + timedelta(days=last)))
    return windows


def without_dates(query: str) -> str:
    """`query` with the dates it names taken out: a year in "May 2023" is a date, not an
    identifier that rows must contain (fusion's identifier gate)."""
    return _RELATIVE_RE.sub(" ", _YEARLESS.sub(" ", _NAMED.sub(" ", query)))
