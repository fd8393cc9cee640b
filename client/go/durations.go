package stagger

import (
	"math"
	"strconv"
	"strings"
)

// FormatDuration writes ns nanoseconds as absl::FormatDuration does ("-1s",
// "1m0.5s", "2m", "500ms", "24h0.000000001s"), the form durations take in
// staggerd's messages (tests/vectors/client_vectors.json, duration_text):
// hours and minutes as integers, the rest as seconds with up to 11
// fractional digits; under one second a single unit (ms, us, ns) with a
// fraction; "0" for zero.
func FormatDuration(ns int64) string {
	sign := ""
	u := uint64(ns)
	if ns < 0 {
		sign, u = "-", uint64(-ns)
	}
	var text string
	switch {
	case u < 1_000:
		text = numberUnit(fdiv(u, 1), 2, "ns")
	case u < 1_000_000:
		text = numberUnit(fdiv(u, 1_000), 5, "us")
	case u < 1_000_000_000:
		text = numberUnit(fdiv(u, 1_000_000), 8, "ms")
	default:
		hours, rest := u/(3600e9), u%(3600e9)
		minutes, rest := rest/60e9, rest%60e9
		if hours != 0 {
			text += strconv.FormatUint(hours, 10) + "h"
		}
		if minutes != 0 {
			text += strconv.FormatUint(minutes, 10) + "m"
		}
		text += numberUnit(fdiv(rest, 1_000_000_000), 11, "s")
	}
	if text == "" {
		return "0"
	}
	return sign + text
}

// fdiv is absl::FDivDuration(ns, unit) for ns >= 0: both as doubles of
// quarter-nanosecond ticks.
func fdiv(ns, unit uint64) float64 {
	ticks := func(n uint64) float64 {
		return float64(n/1_000_000_000)*4e9 + float64((n%1_000_000_000)*4)
	}
	return ticks(ns) / ticks(unit)
}

// numberUnit is absl's AppendNumberUnit(double): the integer part, then up
// to prec fractional digits without trailing zeros; "" when both are 0.
func numberUnit(n float64, prec int, unit string) string {
	whole, frac := math.Modf(n)
	fracPart := int64(frac*math.Pow10(prec) + 0.5)
	intPart := int64(whole)
	if intPart == 0 && fracPart == 0 {
		return ""
	}
	text := strconv.FormatInt(intPart, 10)
	if fracPart != 0 {
		digits := strconv.FormatInt(fracPart, 10)
		digits = strings.Repeat("0", prec-len(digits)) + digits
		text += "." + strings.TrimRight(digits, "0")
	}
	return text + unit
}
