package stagger

import (
	"context"
	"time"
)

type waitKind int

const (
	waitNone    waitKind = iota // a plain Admit
	waitBackoff                 // a waiting Admit for a backoff
	waitPark                    // a waiting Admit for a DEFER
)

// run is one delivery's run. Between steps, d (or err) answers call about
// attempt (admit: may it be sent; report: it finished with outcome),
// asked at askedAt with wait (kind kind).
type run struct {
	l        *RetryLoop
	ctx      context.Context
	endpoint string
	send     SendFunc
	res      Result

	attempt int
	report  bool // the answer is a Report's
	outcome Outcome
	d       Decision
	err     error
	wait    time.Duration
	kind    waitKind
	askedAt time.Time
	// When the current backoff or park ends (what the coordinator owed).
	notBefore time.Time
	// The first DEFER of the current stretch; zero: not parked.
	parkedSince time.Time
}

func (r *run) end(e End, err error) bool {
	r.res.End = e
	if err != nil {
		r.res.Err = err
	}
	return true
}

func (r *run) now() time.Time  { return r.l.o.Clock.Now() }
func (r *run) cancelled() bool { return r.ctx.Err() != nil }

// step acts on the answer; true when the run has ended.
func (r *run) step() bool {
	if r.err == nil {
		if f := r.l.o.OnDecision; f != nil {
			call := "admit"
			if r.report {
				call = "report"
			}
			f(DecisionEvent{Call: call, Attempt: r.attempt, Outcome: r.outcome, Wait: r.wait, Decision: r.d})
		}
		d := r.d
		r.res.LastDecision = &d
	}
	if r.report && r.outcome == Success {
		return r.end(EndSucceeded, r.err)
	}
	if r.err != nil {
		if r.cancelled() && !isInvalid(r.err) {
			return r.end(EndCancelled, nil)
		}
		return r.end(EndError, r.err)
	}
	upcoming := r.attempt
	if r.report {
		upcoming++
	}
	switch r.d.Verdict {
	case GiveUp:
		return r.end(EndGaveUp, nil)
	case Done:
		return r.end(EndError, ErrProtocol)
	case Defer:
		return r.park(upcoming)
	}
	r.parkedSince = time.Time{} // a PROCEED ends a stretch
	if r.report {
		return r.backoff(upcoming)
	}
	return r.proceed()
}

func isInvalid(err error) bool {
	_, ok := err.(*InvalidArgumentError)
	return ok
}

// backoff: PROCEED(delay) to a failure Report; the retry after it.
func (r *run) backoff(upcoming int) bool {
	d := r.d.Delay
	r.notBefore = r.now().Add(d)
	if r.waits() && d > 0 {
		return r.ask(upcoming, waitBackoff, minDuration(d, MaxWait))
	}
	if !r.sleep(d) {
		return r.end(EndCancelled, nil)
	}
	return r.ask(upcoming, waitNone, 0)
}

// park: DEFER; park, then ask again, or end past the park limit.
func (r *run) park(upcoming int) bool {
	if !r.sleepOwed() {
		return r.end(EndCancelled, nil)
	}
	now := r.now()
	if r.parkedSince.IsZero() {
		r.parkedSince = now
	}
	park := maxDuration(r.d.DeferFor, MinPark)
	limit := r.l.o.ParkLimit
	if limit < 0 || (limit > 0 && now.Add(park).Sub(r.parkedSince) > limit) {
		return r.end(EndDeferred, nil)
	}
	r.notBefore = now.Add(park)
	if r.waits() {
		return r.ask(upcoming, waitPark, minDuration(park, MaxWait))
	}
	if !r.sleep(park) {
		return r.end(EndCancelled, nil)
	}
	return r.ask(upcoming, waitNone, 0)
}

// proceed: PROCEED(delay) to an Admit: the delay, the attempt, its
// Report; or, at the end of a waiting backoff with backoff still owed,
// wait again for the rest.
func (r *run) proceed() bool {
	if !r.sleepOwed() {
		return r.end(EndCancelled, nil)
	}
	now := r.now()
	if r.kind == waitBackoff && r.d.Source == FromCoordinator && r.d.Reason == Admitted &&
		!now.Before(r.askedAt.Add(r.wait)) && r.notBefore.After(now) {
		return r.ask(r.attempt, waitBackoff, minDuration(r.notBefore.Sub(now), MaxWait))
	}
	if !r.sleep(r.d.Delay) || r.cancelled() {
		return r.end(EndCancelled, nil)
	}
	n := r.attempt
	if n == 1 && r.res.FirstAttemptTime.IsZero() {
		r.res.FirstAttemptTime = r.now()
	}
	result := r.sendOne(n)
	r.res.AttemptsMade++
	r.res.NextAttempt = n + 1
	r.report, r.outcome, r.wait, r.kind = true, result.Outcome, 0, waitNone
	r.d, r.err = r.l.c.Report(context.Background(), ReportRequest{
		Endpoint: r.endpoint, Attempt: n, Outcome: result.Outcome, RetryAfter: result.RetryAfter,
		Deadline: r.l.o.Deadline, FirstAttemptTime: r.res.FirstAttemptTime, Admission: r.d.Admission})
	return false
}

// sendOne runs one attempt under its own context (not the run's: an
// attempt already sent is let finish); an error is a failure.
func (r *run) sendOne(n int) AttemptResult {
	ctx, cancel := context.WithTimeout(context.Background(), r.l.o.AttemptTimeout)
	defer cancel()
	result, err := r.send(ctx, Attempt{Number: n})
	switch {
	case err != nil && isTimeout(err):
		return AttemptResult{Outcome: Timeout}
	case err != nil:
		return AttemptResult{Outcome: RetryableFailure}
	}
	return result
}

// sleepOwed: the local fallback answered a waiting Admit; first the rest
// of what the coordinator's answer owed.
func (r *run) sleepOwed() bool {
	if r.wait <= 0 || r.d.Source != FromFallback {
		return true
	}
	return r.sleep(r.notBefore.Sub(r.now()))
}

// waits: the answer came from a coordinator that holds waiting calls.
func (r *run) waits() bool {
	return !r.l.o.NoWaiting && r.d.WaitSupported && r.d.Source == FromCoordinator
}

// ask: Admit(attempt), waiting `wait` when > 0; true if cancelled first.
func (r *run) ask(attempt int, kind waitKind, wait time.Duration) bool {
	if r.cancelled() {
		return r.end(EndCancelled, nil)
	}
	r.attempt, r.report, r.outcome = attempt, false, 0
	r.wait, r.kind, r.askedAt = wait, kind, r.now()
	ctx := context.Background()
	if wait > 0 {
		ctx = r.ctx // a waiting Admit is cut short by cancellation
	}
	r.d, r.err = r.l.c.Admit(ctx, AdmitRequest{Endpoint: r.endpoint, Attempt: attempt,
		Deadline: r.l.o.Deadline, FirstAttemptTime: r.res.FirstAttemptTime, Wait: wait})
	return false
}

// sleep d (nothing when <= 0); false if cancelled before or during.
func (r *run) sleep(d time.Duration) bool {
	if r.cancelled() {
		return false
	}
	if d <= 0 {
		return true
	}
	return r.l.o.Sleep(r.ctx, d)
}
