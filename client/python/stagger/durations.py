"""Durations as integer nanoseconds, and their text as absl::FormatDuration
writes it ("-1s", "1m0.5s", "2m", "500ms", "24h0.000000001s"), the form
they take in staggerd's messages.

Contract:
  * format_duration(ns) equals absl::FormatDuration(absl::Nanoseconds(ns))
    for every int64 ns (tests/vectors/client_vectors.json, duration_text,
    holds both to it): hours and minutes as integers, the rest as seconds
    with up to 11 fractional digits; under one second a single unit (ms, us,
    ns) with a fraction; "0" for zero.
  * to_nanos(seconds) rounds a float number of seconds to nanoseconds
    (whole seconds and the fraction apart, so an instant's fraction keeps
    its nanoseconds); NaN and infinities are refused (InvalidArgument
    naming `field`).
Pure functions.
"""

import math

from stagger.errors import InvalidArgument

NANOS_PER_SECOND = 1_000_000_000
# absl::Duration's tick: a quarter of a nanosecond (FDivDuration's unit).
_TICKS_PER_SECOND = 4_000_000_000
_TICKS_PER_NANO = 4


def to_nanos(seconds: float, field: str) -> int:
    """`seconds` as whole nanoseconds (rounded to nearest)."""
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
        raise InvalidArgument(
            "%s: must be a number of seconds, got %r" % (field, seconds))
    if not math.isfinite(seconds):
        raise InvalidArgument(
            "%s: must be a finite number of seconds, got %r" % (field, seconds))
    if isinstance(seconds, int):
        return seconds * NANOS_PER_SECOND
    whole = math.floor(seconds)  # exact; so is seconds - whole
    return whole * NANOS_PER_SECOND + round((seconds - whole) * NANOS_PER_SECOND)


def _fdiv(ns: int, unit_ns: int) -> float:
    """absl::FDivDuration(ns, unit) for ns >= 0: both as doubles of ticks."""
    def ticks(n: int) -> float:
        hi, lo = divmod(n, NANOS_PER_SECOND)
        return float(hi) * _TICKS_PER_SECOND + float(lo * _TICKS_PER_NANO)
    return ticks(ns) / ticks(unit_ns)


def _number_unit(n: float, prec: int, abbr: str) -> str:
    """absl's AppendNumberUnit(double): the integer part, then up to `prec`
    fractional digits without trailing zeros; nothing when both are 0."""
    frac, whole = math.modf(n)
    frac_part = int(frac * 10 ** prec + 0.5)  # absl's Round, n >= 0
    int_part = int(whole)
    if int_part == 0 and frac_part == 0:
        return ""
    text = str(int_part)
    if frac_part != 0:
        text += "." + str(frac_part).rjust(prec, "0").rstrip("0")
    return text + abbr


def format_duration(ns: int) -> str:
    """absl::FormatDuration of `ns` nanoseconds."""
    sign = "-" if ns < 0 else ""
    ns = abs(ns)
    if ns < NANOS_PER_SECOND:
        if ns < 1_000:
            text = _number_unit(_fdiv(ns, 1), 2, "ns")
        elif ns < 1_000_000:
            text = _number_unit(_fdiv(ns, 1_000), 5, "us")
        else:
            text = _number_unit(_fdiv(ns, 1_000_000), 8, "ms")
    else:
        hours, rest = divmod(ns, 3600 * NANOS_PER_SECOND)
        minutes, rest = divmod(rest, 60 * NANOS_PER_SECOND)
        text = (("%dh" % hours if hours else "") +
                ("%dm" % minutes if minutes else "") +
                _number_unit(_fdiv(rest, NANOS_PER_SECOND), 11, "s"))
    return (sign + text) if text else "0"
