package stagger

import (
	"strconv"
	"strings"
	"time"
)

// HTTP -> Stagger vocabulary, the same table and parsing as the C++ client
// (client/http_outcome.h); tests/vectors/client_vectors.json (http_status,
// retry_after) holds every client to it.
//
// OutcomeFromHTTPStatus: 200..299 Success; 408 Timeout; 429, 503
// RateLimited; other 500..599 RetryableFailure; other 300..499
// PermanentFailure (a redirect not followed is answered the same way
// again); anything else (1xx as a final status, 0 or negative for "no
// response", >= 600) RetryableFailure.
func OutcomeFromHTTPStatus(status int) Outcome {
	switch {
	case status >= 200 && status <= 299:
		return Success
	case status == 408:
		return Timeout
	case status == 429 || status == 503:
		return RateLimited
	case status >= 500 && status <= 599:
		return RetryableFailure
	case status >= 300 && status <= 499:
		return PermanentFailure
	}
	return RetryableFailure
}

// MaxRetryAfter is the most a Retry-After is taken as (what the
// coordinator accepts).
const MaxRetryAfter = 24 * time.Hour

const httpWhitespace = " \t\n\v\f\r"

var (
	dayNames   = []string{"monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"}
	monthNames = []string{"jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"}
)

// ParseRetryAfter reads a Retry-After header (RFC 9110 10.2.3) received at
// `now`: delta-seconds ("120"; "-5" is 0) or an HTTP-date in its three
// forms (IMF-fixdate, RFC 850 with 19xx for years 69..99, asctime), names
// case-insensitive, surrounded by spaces, tabs, CR, LF, VT or FF only. The
// result is clamped to [0, MaxRetryAfter]; nil means "no Retry-After"
// ("", "1.5", "soon", another zone than GMT).
func ParseRetryAfter(header string, now time.Time) *time.Duration {
	s := strings.Trim(header, httpWhitespace)
	if s == "" {
		return nil
	}
	if allDigits(s) {
		return clampRetryAfter(digitsSeconds(s))
	}
	if s[0] == '-' && allDigits(s[1:]) {
		zero := time.Duration(0)
		return &zero
	}
	if !isAlpha(s[0]) {
		return nil
	}
	t, ok := parseHTTPDate(s)
	if !ok {
		return nil
	}
	return clampRetryAfter(time.Unix(t, 0).Sub(now))
}

func digitsSeconds(s string) time.Duration {
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil || n > uint64(MaxRetryAfter/time.Second) {
		return MaxRetryAfter
	}
	return time.Duration(n) * time.Second
}

func clampRetryAfter(d time.Duration) *time.Duration {
	if d < 0 {
		d = 0
	}
	if d > MaxRetryAfter {
		d = MaxRetryAfter
	}
	return &d
}

func allDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func isAlpha(c byte) bool { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') }

// hasShape: 'A' a letter, 'D' a digit, '_' a digit or a space, else itself.
func hasShape(s, pattern string) bool {
	if len(s) != len(pattern) {
		return false
	}
	for i := 0; i < len(s); i++ {
		c, p := s[i], pattern[i]
		ok := c == p
		switch p {
		case 'A':
			ok = isAlpha(c)
		case 'D':
			ok = c >= '0' && c <= '9'
		case '_':
			ok = c == ' ' || (c >= '0' && c <= '9')
		}
		if !ok {
			return false
		}
	}
	return true
}

func atoi(s string) int {
	n, _ := strconv.Atoi(strings.TrimSpace(s))
	return n
}

func indexOf(list []string, s string) int {
	for i, x := range list {
		if x == s {
			return i
		}
	}
	return -1
}

func isDayPrefix(s string) bool {
	for _, d := range dayNames {
		if d[:3] == strings.ToLower(s) {
			return true
		}
	}
	return false
}

// parseHTTPDate: Unix seconds of an HTTP-date in one of its exact shapes.
func parseHTTPDate(s string) (int64, bool) {
	if hasShape(s, "AAA, DD AAA DDDD DD:DD:DD GMT") { // IMF-fixdate
		if !isDayPrefix(s[0:3]) {
			return 0, false
		}
		return unixSeconds(atoi(s[12:16]), s[8:11], atoi(s[5:7]), s[17:25])
	}
	if hasShape(s, "AAA AAA _D DD:DD:DD DDDD") { // asctime
		if !isDayPrefix(s[0:3]) {
			return 0, false
		}
		return unixSeconds(atoi(s[20:24]), s[4:7], atoi(s[8:10]), s[11:19])
	}
	comma := strings.IndexByte(s, ',') // RFC 850: a whole day name first
	if comma < 6 || !hasShape(s[comma:], ", DD-AAA-DD DD:DD:DD GMT") {
		return 0, false
	}
	for i := 0; i < comma; i++ {
		if !isAlpha(s[i]) {
			return 0, false
		}
	}
	if indexOf(dayNames, strings.ToLower(s[:comma])) < 0 {
		return 0, false
	}
	rest := s[comma:]
	yy := atoi(rest[9:11])
	if yy >= 69 {
		yy += 1900
	} else {
		yy += 2000
	}
	return unixSeconds(yy, rest[5:8], atoi(rest[2:4]), rest[12:20])
}

func monthDays(y, m int) int {
	switch m {
	case 2:
		if y%4 == 0 && (y%100 != 0 || y%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}

// unixSeconds: the instant, or false if a field is out of range (second
// 60 is the next minute).
func unixSeconds(y int, mon string, d int, hms string) (int64, bool) {
	m := indexOf(monthNames, strings.ToLower(mon)) + 1
	if m == 0 {
		return 0, false
	}
	h, mi, sec := atoi(hms[0:2]), atoi(hms[3:5]), atoi(hms[6:8])
	if d < 1 || d > monthDays(y, m) || h > 23 || mi > 59 || sec > 60 {
		return 0, false
	}
	days := time.Date(y, time.Month(m), d, 0, 0, 0, 0, time.UTC).Unix() / 86400
	return days*86400 + int64(h*3600+mi*60+sec), true
}
