package stagger

import (
	"fmt"
	"time"
)

// Outcome is what happened to one attempt (stagger.v1.Outcome).
type Outcome int32

const (
	Success          Outcome = 1 // 2xx
	RetryableFailure Outcome = 2 // 5xx, connection reset, connect error
	Timeout          Outcome = 3 // no answer within the worker's own timeout
	RateLimited      Outcome = 4 // 429 / 503, usually with Retry-After
	PermanentFailure Outcome = 5 // other 4xx: retrying cannot help
)

var outcomeNames = map[Outcome]string{Success: "SUCCESS", RetryableFailure: "RETRYABLE_FAILURE",
	Timeout: "TIMEOUT", RateLimited: "RATE_LIMITED", PermanentFailure: "PERMANENT_FAILURE"}

// String is the proto name ("RATE_LIMITED").
func (o Outcome) String() string { return nameOr(outcomeNames[o], "OUTCOME", int32(o)) }

// Verdict is what to do (stagger.v1.Verdict).
type Verdict int32

const (
	Proceed Verdict = 1 // send after Delay
	Defer   Verdict = 2 // not now: ask again (same attempt) after DeferFor
	GiveUp  Verdict = 3 // dead-letter the delivery; Reason says why
	Done    Verdict = 4 // the success is recorded
)

var verdictNames = map[Verdict]string{Proceed: "PROCEED", Defer: "DEFER", GiveUp: "GIVE_UP", Done: "DONE"}

func (v Verdict) String() string { return nameOr(verdictNames[v], "VERDICT", int32(v)) }

// Reason is why (stagger.v1.Reason); stable and machine-readable.
type Reason int32

const (
	InitialJitter     Reason = 1
	Backoff           Reason = 2
	RetryAfter        Reason = 3
	CircuitOpen       Reason = 4
	HalfOpenProbe     Reason = 5
	BudgetExhausted   Reason = 6
	AttemptsExhausted Reason = 7
	NotRetryable      Reason = 8
	Deadline          Reason = 9
	Succeeded         Reason = 10
	HalfOpenBusy      Reason = 11
	RetryAfterWindow  Reason = 12
	Admitted          Reason = 13
	Paced             Reason = 14
	LastChance        Reason = 15
	Paused            Reason = 16
	Released          Reason = 17
	EndpointDisabled  Reason = 18
)

var reasonNames = map[Reason]string{InitialJitter: "INITIAL_JITTER", Backoff: "BACKOFF",
	RetryAfter: "RETRY_AFTER", CircuitOpen: "CIRCUIT_OPEN", HalfOpenProbe: "HALF_OPEN_PROBE",
	BudgetExhausted: "BUDGET_EXHAUSTED", AttemptsExhausted: "ATTEMPTS_EXHAUSTED",
	NotRetryable: "NOT_RETRYABLE", Deadline: "DEADLINE", Succeeded: "SUCCEEDED",
	HalfOpenBusy: "HALF_OPEN_BUSY", RetryAfterWindow: "RETRY_AFTER_WINDOW", Admitted: "ADMITTED",
	Paced: "PACED", LastChance: "LAST_CHANCE", Paused: "PAUSED", Released: "RELEASED",
	EndpointDisabled: "ENDPOINT_DISABLED"}

// String is the proto name ("CIRCUIT_OPEN"), or "REASON_<n>" for a reason
// newer than this package.
func (r Reason) String() string { return nameOr(reasonNames[r], "REASON", int32(r)) }

func nameOr(name, kind string, n int32) string {
	if name != "" {
		return name
	}
	return fmt.Sprintf("%s_%d", kind, n)
}

// Source says where a decision came from.
type Source int

const (
	FromCoordinator Source = 0 // staggerd or stagger-agent answered
	FromFallback    Source = 1 // decided in-process: see FallbackCause
)

func (s Source) String() string {
	if s == FromFallback {
		return "local"
	}
	return "coordinator"
}

// LocalAdmission is the admission token of an attempt admitted without the
// coordinator (ReportRequest.admission: never a probe).
const LocalAdmission uint64 = 1

// Decision mirrors stagger.v1.Decision in Go's units. DeferUntil is on the
// client's clock, from the answer's relative defer_for (the worker's and
// the server's clocks need not agree).
type Decision struct {
	Verdict Verdict
	Reason  Reason
	// Admit: the request's attempt; a failure Report: attempt + 1.
	Attempt    int
	Delay      time.Duration // Proceed: wait this long before sending
	DeferFor   time.Duration // Defer: ask again after this long ...
	DeferUntil time.Time     // ... at this instant
	// Proceed to an Admit: the token to echo in this attempt's Report.
	Admission uint64
	// The coordinator that answered holds waiting Admits (this answer says).
	WaitSupported bool
	Source        Source
	FallbackCause error  // FromFallback: why the coordinator did not decide
	Replica       string // FromCoordinator: the member that answered
}

func (d Decision) String() string {
	s := fmt.Sprintf("%v(%v) attempt %d", d.Verdict, d.Reason, d.Attempt)
	switch d.Verdict {
	case Proceed:
		s += fmt.Sprintf(" delay %v", d.Delay)
	case Defer:
		s += fmt.Sprintf(" for %v", d.DeferFor)
	}
	if d.Source == FromFallback {
		s += fmt.Sprintf(" [local: %v]", d.FallbackCause)
	}
	return s
}

// AdmitRequest asks whether attempt Attempt to Endpoint may be sent now.
// Zero times are not sent.
type AdmitRequest struct {
	Endpoint         string
	Attempt          int
	Deadline         time.Time     // the whole delivery's deadline
	FirstAttemptTime time.Time     // when attempt 1 was sent
	Wait             time.Duration // waiting admission: 0..60 s
}

// ReportRequest says what happened to attempt Attempt.
type ReportRequest struct {
	Endpoint         string
	Attempt          int
	Outcome          Outcome
	RetryAfter       *time.Duration // the endpoint's Retry-After, if it sent one
	Deadline         time.Time
	FirstAttemptTime time.Time
	Admission        uint64 // the Decision.Admission of the Admit that let it go
}
