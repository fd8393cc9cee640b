package stagger

import (
	"time"
	"unicode/utf8"
)

// Request checks with staggerd's exact INVALID_ARGUMENT messages, in its
// order, for the local fallback: bad input is the same error with or
// without the coordinator (tests/vectors/client_vectors.json, validation).
//
//	endpoint     "endpoint: must not be empty" | "endpoint: N bytes, over the
//	             limit of M (limits.max_key_bytes)" | "endpoint: control
//	             character 0xNN at byte I" | "endpoint: not valid UTF-8 at
//	             byte I"
//	attempt      "attempt: must be in [1, 1000000], got N"
//	outcome      "outcome: must be set" | "outcome: unknown value N"
//	retry_after  "retry_after: must be >= 0, got D" | "... must be <= 24h, got D"
//	wait         "wait: must be >= 0, got D" | "wait: must be <= 1m, got D"
//
// D is FormatDuration's text.

// The limits staggerd checks.
const (
	MaxAttempt = 1_000_000
	MaxWait    = time.Minute // AdmitRequest.Wait
)

const (
	minTimestamp = -62135596800 // 0001-01-01T00:00:00Z
	maxTimestamp = 253402300799 // 9999-12-31T23:59:59Z
)

// invalidUTF8At: the offset of the first byte not part of well-formed
// UTF-8, or -1.
func invalidUTF8At(s string) int {
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n <= 1 {
			return i
		}
		i += n
	}
	return -1
}

func endpointError(key string, maxKeyBytes int) error {
	if key == "" {
		return invalid("endpoint: must not be empty")
	}
	if len(key) > maxKeyBytes {
		return invalid("endpoint: %d bytes, over the limit of %d (limits.max_key_bytes)", len(key), maxKeyBytes)
	}
	for i := 0; i < len(key); i++ {
		if key[i] < 0x20 || key[i] == 0x7f {
			return invalid("endpoint: control character 0x%02x at byte %d", key[i], i)
		}
	}
	if bad := invalidUTF8At(key); bad >= 0 {
		return invalid("endpoint: not valid UTF-8 at byte %d", bad)
	}
	return nil
}

func attemptError(attempt int) error {
	if attempt >= 1 && attempt <= MaxAttempt {
		return nil
	}
	return invalid("attempt: must be in [1, %d], got %d", MaxAttempt, attempt)
}

func timestampError(t time.Time, field string) error {
	if t.IsZero() {
		return nil
	}
	if s := t.Unix(); s < minTimestamp || s > maxTimestamp {
		return invalid("%s: not a valid Timestamp (seconds=%d, nanos=%d)", field, s, t.Nanosecond())
	}
	return nil
}

func rangeError(field string, d, max time.Duration, maxText string) error {
	if d < 0 {
		return invalid("%s: must be >= 0, got %s", field, FormatDuration(int64(d)))
	}
	if d > max {
		return invalid("%s: must be <= %s, got %s", field, maxText, FormatDuration(int64(d)))
	}
	return nil
}

func firstError(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

// CheckAdmit is staggerd's answer to `in` if it is invalid, else nil.
func CheckAdmit(in AdmitRequest, maxKeyBytes int) error {
	return firstError(timestampError(in.Deadline, "deadline"),
		timestampError(in.FirstAttemptTime, "first_attempt_time"),
		endpointError(in.Endpoint, maxKeyBytes), attemptError(in.Attempt),
		rangeError("wait", in.Wait, MaxWait, "1m"))
}

// CheckReport is staggerd's answer to `in` if it is invalid, else nil.
func CheckReport(in ReportRequest, maxKeyBytes int) error {
	if in.Outcome == 0 {
		return invalid("outcome: must be set")
	}
	if in.Outcome < Success || in.Outcome > PermanentFailure {
		return invalid("outcome: unknown value %d", in.Outcome)
	}
	var ra error
	if in.RetryAfter != nil {
		ra = rangeError("retry_after", *in.RetryAfter, MaxRetryAfter, "24h")
	}
	return firstError(timestampError(in.Deadline, "deadline"),
		timestampError(in.FirstAttemptTime, "first_attempt_time"),
		endpointError(in.Endpoint, maxKeyBytes), attemptError(in.Attempt), ra)
}
