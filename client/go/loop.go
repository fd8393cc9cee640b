package stagger

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"
)

// RetryLoop runs one delivery's ask -> wait -> send -> report loop, driven
// by the coordinator's decisions: the loop docs/CLIENT_CONTRACT.md states
// for every client language (tests/conformance/ holds this one to it).
//
//	Admit(n)   PROCEED(d)  sleep d, send attempt n, Report(n, outcome,
//	                       admission = that Admit's token)
//	           DEFER(f)    park f (below), then Admit(n) again
//	           GIVE_UP     end EndGaveUp (Result.LastDecision.Reason says why)
//	Report(n)  SUCCESS     end EndSucceeded, whatever the answer
//	(failure)  PROCEED(d)  back off d (below), then Admit(n+1)
//	           DEFER(f)    park f, then Admit(n+1)
//	           GIVE_UP     end EndGaveUp
//	DONE to anything but a success report (ErrProtocol), or an error
//	(*InvalidArgumentError: bad input): end EndError, and Run returns it.
//
// Waiting admission (on unless NoWaiting): when the answer came from a
// coordinator that holds waiting calls (Decision.WaitSupported), a backoff
// d is waited through it -- Admit(n+1, Wait = min(d, 60 s)), and again for
// the rest when a PROCEED(ADMITTED) comes back at the end of that wait with
// backoff still owed -- and a DEFER(f) is parked at it with Admit(n, Wait =
// min(max(f, MinPark), 60 s)). Otherwise the loop sleeps the backoff, or
// max(f, MinPark), then asks without waiting. A waiting Admit answered by
// the local fallback first sleeps the rest of what the coordinator's answer
// owed, then acts on the fallback's answer. A run ends EndDeferred when
// the delivery would stay parked longer than ParkLimit since the first
// DEFER of the stretch (zero: no limit; ParkInQueue: every DEFER ends it,
// to park the delivery in a queue and Resume it later).
//
// Each send gets a context that ends after AttemptTimeout (default 30 s);
// an error from it is reported TIMEOUT if it is a timeout
// (context.DeadlineExceeded, a net.Error's Timeout()), else
// RETRYABLE_FAILURE. Cancellation (the run's ctx) is checked before every
// sleep, Admit and send, and ends any sleep or waiting Admit at once: the
// run ends EndCancelled before the next attempt. An attempt already
// running is let finish (its context is not the run's) and reported; a
// final answer is never turned into EndCancelled.
// A RetryLoop holds no per-run state: share it between goroutines if its
// options' functions are safe for that.
type RetryLoop struct {
	c Coordinator
	o LoopOptions
}

// Coordinator is what the loop needs (Client; tests script their own).
type Coordinator interface {
	Admit(ctx context.Context, in AdmitRequest) (Decision, error)
	Report(ctx context.Context, in ReportRequest) (Decision, error)
}

// The contract's defaults.
const (
	DefaultAttemptTimeout = 30 * time.Second
	// A DEFER is never waited or slept for less.
	MinPark = 10 * time.Millisecond
	// ParkInQueue as LoopOptions.ParkLimit ends the run at every DEFER.
	ParkInQueue time.Duration = -1
)

// LoopOptions configure a RetryLoop; the zero value is the contract's
// defaults.
type LoopOptions struct {
	Deadline       time.Time     // the whole delivery's; zero: none
	AttemptTimeout time.Duration // each send's; zero: DefaultAttemptTimeout
	NoWaiting      bool          // turn waiting admission off
	ParkLimit      time.Duration // zero: no limit; ParkInQueue: none at all
	// How the loop sleeps: true if the whole time passed, false if ctx
	// ended first. Default: a timer.
	Sleep func(ctx context.Context, d time.Duration) bool
	Clock Clock // first attempt's time, owed time; default RealClock
	// Called with every decision received, before acting on it.
	OnDecision func(DecisionEvent)
}

// DecisionEvent is one decision as the loop received it.
type DecisionEvent struct {
	Call     string        // "admit" or "report"
	Attempt  int           // the attempt the call was about
	Outcome  Outcome       // report only
	Wait     time.Duration // a waiting Admit's
	Decision Decision
}

// Attempt is the attempt to send: its number (1 for the first).
type Attempt struct{ Number int }

// AttemptResult is what one attempt produced: named fields, all optional
// but the Outcome, so more of what the endpoint said fits without
// changing callers.
type AttemptResult struct {
	Outcome    Outcome
	RetryAfter *time.Duration // the endpoint's Retry-After (ParseRetryAfter)
}

// SendFunc sends one attempt; ctx ends at the attempt timeout.
type SendFunc func(ctx context.Context, a Attempt) (AttemptResult, error)

// End is how a run ended.
type End int

const (
	EndSucceeded End = iota + 1 // an attempt succeeded
	EndGaveUp                   // dead-letter it
	EndDeferred                 // parked past ParkLimit: park it, Resume later
	EndCancelled                // the run's ctx ended
	EndError                    // Result.Err says why
)

func (e End) String() string {
	return [...]string{"?", "SUCCEEDED", "GAVE_UP", "DEFERRED", "CANCELLED", "ERROR"}[e]
}

// Result is how a run went.
type Result struct {
	End          End
	AttemptsMade int // sends during this run
	// The attempt to send next: one more than the last one sent, or the
	// run's first attempt if none was (Resume a deferred or cancelled run
	// here).
	NextAttempt      int
	LastDecision     *Decision
	FirstAttemptTime time.Time // to Resume with
	// EndError: why. EndSucceeded: an error the success's Report got, if
	// any (the delivery is done; log it).
	Err error
}

// DeferFor is how long to park a deferred delivery (0 otherwise).
func (r Result) DeferFor() time.Duration {
	if r.End == EndDeferred && r.LastDecision != nil {
		return r.LastDecision.DeferFor
	}
	return 0
}

func (r Result) String() string {
	why := ""
	if (r.End == EndGaveUp || r.End == EndDeferred) && r.LastDecision != nil {
		why = fmt.Sprintf(" (%v)", r.LastDecision.Reason)
	}
	if r.End == EndError {
		why = fmt.Sprintf(": %v", r.Err)
	}
	return fmt.Sprintf("%v%s after %d attempt(s)", r.End, why, r.AttemptsMade)
}

// NewRetryLoop is a loop over c with options o.
func NewRetryLoop(c Coordinator, o LoopOptions) *RetryLoop {
	if o.AttemptTimeout <= 0 {
		o.AttemptTimeout = DefaultAttemptTimeout
	}
	if o.Clock == nil {
		o.Clock = RealClock
	}
	if o.Sleep == nil {
		o.Sleep = sleepCtx
	}
	return &RetryLoop{c: c, o: o}
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// Run delivers to endpoint from its first attempt; the error is Result.Err
// when the run ended EndError.
func (l *RetryLoop) Run(ctx context.Context, endpoint string, send SendFunc) (Result, error) {
	return l.Resume(ctx, endpoint, 1, time.Time{}, send)
}

// Resume delivers a parked delivery from nextAttempt, with the time of its
// first attempt (zero: not sent yet).
func (l *RetryLoop) Resume(ctx context.Context, endpoint string, nextAttempt int,
	firstAttemptTime time.Time, send SendFunc) (Result, error) {
	r := &run{l: l, ctx: ctx, endpoint: endpoint, send: send, notBefore: time.Time{},
		res: Result{NextAttempt: nextAttempt, FirstAttemptTime: firstAttemptTime}}
	done := r.ask(nextAttempt, waitNone, 0)
	for !done {
		done = r.step()
	}
	if r.res.End == EndError {
		return r.res, r.res.Err
	}
	return r.res, nil
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}
