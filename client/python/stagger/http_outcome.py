"""HTTP -> Stagger vocabulary: the Outcome to report for an HTTP status, and
the Retry-After header as a duration. The same table and parsing as the C++
client (client/http_outcome.h); tests/vectors/client_vectors.json
(http_status, retry_after) holds both to it.

outcome_from_http_status:
  200..299 SUCCESS; 408 TIMEOUT; 429, 503 RATE_LIMITED; other 500..599
  RETRYABLE_FAILURE; other 300..499 PERMANENT_FAILURE (a redirect not
  followed is answered the same way again); anything else (1xx as a final
  status, 0 or negative "no response", >= 600) RETRYABLE_FAILURE.

parse_retry_after(header, now) -> seconds or None:
  * delta-seconds: ASCII digits only ("120"); saturates at one day;
    "-<digits>" gives 0.
  * HTTP-date in its three forms (RFC 9110 10.2.3), each of an exact shape:
    IMF-fixdate "Sun, 06 Nov 1994 08:49:37 GMT", RFC 850
    "Sunday, 06-Nov-94 08:49:37 GMT" (two-digit years 69..99 are 19xx,
    00..68 20xx) and asctime "Sun Nov  6 08:49:37 1994". Names match
    case-insensitively; the weekday is not checked against the date; a
    day the month does not have is refused; second 60 is the next minute.
    Converted relative to `now` (the response's receipt time, Unix seconds).
  * Spaces, tabs, CR, LF, VT and FF around it are ignored (only those).
  * Results are clamped to [0, 1 day] (the most the coordinator accepts);
    anything else ("", "1.5", "soon", another zone than GMT) is None:
    report no Retry-After.
Pure functions.
"""

from typing import Optional

from stagger.decision import Outcome

MAX_RETRY_AFTER_SECONDS = 86400  # engine::kMaxRetryAfter (1 day)

_WHITESPACE = " \t\n\v\f\r"  # absl::StripAsciiWhitespace
_DIGITS = "0123456789"
_DAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday",
         "sunday")
_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep",
           "oct", "nov", "dec")


def outcome_from_http_status(status: int) -> Outcome:
    if 200 <= status <= 299:
        return Outcome.SUCCESS
    if status == 408:
        return Outcome.TIMEOUT
    if status in (429, 503):
        return Outcome.RATE_LIMITED
    if 500 <= status <= 599:
        return Outcome.RETRYABLE_FAILURE
    if 300 <= status <= 499:
        return Outcome.PERMANENT_FAILURE
    return Outcome.RETRYABLE_FAILURE


def _all_digits(s: str) -> bool:
    return s != "" and all(c in _DIGITS for c in s)


def _is_alpha(c: str) -> bool:
    return ("a" <= c <= "z") or ("A" <= c <= "Z")


def _has_shape(s: str, pattern: str) -> bool:
    """'A' a letter, 'D' a digit, '_' a digit or a space, else itself."""
    if len(s) != len(pattern):
        return False
    for c, p in zip(s, pattern):
        ok = (_is_alpha(c) if p == "A" else c in _DIGITS if p == "D" else
              (c == " " or c in _DIGITS) if p == "_" else c == p)
        if not ok:
            return False
    return True


def _days_from_civil(y: int, m: int, d: int) -> int:
    """Days since 1970-01-01 of a proleptic Gregorian date (any year)."""
    y -= m <= 2
    era = y // 400
    yoe = y - era * 400
    doy = (153 * (m + (-3 if m > 2 else 9)) + 2) // 5 + d - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146097 + doe - 719468


def _month_days(y: int, m: int) -> int:
    if m == 2:
        return 29 if (y % 4 == 0 and (y % 100 != 0 or y % 400 == 0)) else 28
    return 30 if m in (4, 6, 9, 11) else 31


def _unix_seconds(y: int, mon: str, d: int, hms: str) -> Optional[int]:
    """The instant, or None if a field is out of range."""
    if mon.lower() not in _MONTHS:
        return None
    m = _MONTHS.index(mon.lower()) + 1
    h, mi, sec = int(hms[0:2]), int(hms[3:5]), int(hms[6:8])
    if not (1 <= d <= _month_days(y, m)) or h > 23 or mi > 59 or sec > 60:
        return None
    return _days_from_civil(y, m, d) * 86400 + h * 3600 + mi * 60 + sec


def _parse_http_date(s: str) -> Optional[int]:
    """Unix seconds of an HTTP-date in one of its three exact shapes."""
    if _has_shape(s, "AAA, DD AAA DDDD DD:DD:DD GMT"):  # IMF-fixdate
        if s[0:3].lower() not in [d[:3] for d in _DAYS]:
            return None
        return _unix_seconds(int(s[12:16]), s[8:11], int(s[5:7]), s[17:25])
    if _has_shape(s, "AAA AAA _D DD:DD:DD DDDD"):  # asctime
        if s[0:3].lower() not in [d[:3] for d in _DAYS]:
            return None
        return _unix_seconds(int(s[20:24]), s[4:7], int(s[8:10].strip()),
                             s[11:19])
    comma = s.find(",")  # RFC 850: a whole day name, then a fixed shape
    if (comma >= 6 and all(_is_alpha(c) for c in s[:comma]) and
            _has_shape(s[comma:], ", DD-AAA-DD DD:DD:DD GMT")):
        if s[:comma].lower() not in _DAYS:
            return None
        rest = s[comma:]
        yy = int(rest[9:11])
        return _unix_seconds(yy + (1900 if yy >= 69 else 2000), rest[5:8],
                             int(rest[2:4]), rest[12:20])
    return None


def parse_retry_after(header: Optional[str], now: float) -> Optional[float]:
    """The Retry-After `header` in seconds within [0, 86400], or None."""
    if header is None:
        return None
    s = header.strip(_WHITESPACE)
    if s == "":
        return None
    if _all_digits(s):
        return float(min(int(s), MAX_RETRY_AFTER_SECONDS))
    if s[0] == "-" and _all_digits(s[1:]):
        return 0.0
    if not _is_alpha(s[0]):
        return None
    t = _parse_http_date(s)
    if t is None:
        return None
    return min(max(t - now, 0.0), float(MAX_RETRY_AFTER_SECONDS))
