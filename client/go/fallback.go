package stagger

import (
	"container/list"
	"sync"
	"time"
)

// LocalEngine is how the client decides when neither stagger-agent nor any
// coordinator replica answers (fail-open): docs/CLIENT_CONTRACT.md's
// fallback subset of staggerd's engine, on a LocalPolicy, over this
// process's view of each endpoint only.
//
//	Admit   attempt > MaxAttempts -> GIVE_UP(ATTEMPTS_EXHAUSTED); past the
//	        deadline -> GIVE_UP(DEADLINE); breaker OPEN -> DEFER(CIRCUIT_OPEN);
//	        a retry inside the Retry-After window -> DEFER(RETRY_AFTER_WINDOW);
//	        HALF_OPEN -> a probe, or DEFER(HALF_OPEN_BUSY); a retry ->
//	        PROCEED(ADMITTED); a first attempt -> PROCEED(INITIAL_JITTER,
//	        u * InitialJitter).
//	Report  SUCCESS -> DONE; PERMANENT_FAILURE -> GIVE_UP(NOT_RETRYABLE);
//	        a failure remembers its Retry-After (clamped), feeds the breaker
//	        (not a 429 that carried Retry-After), then for attempt + 1: the
//	        attempt limit, the open or busy breaker, else decorrelated
//	        jitter, or the Retry-After if longer (+ u * Spread), fitted
//	        before the deadline (a redraw within the time left, a last
//	        chance, or GIVE_UP(DEADLINE)).
//
// Deferrals come back at max(target, now + Spread/2) + u * Spread. Every u
// is one draw from the uniform source, in that order, only for a range of
// positive width. Requests must be valid (CheckAdmit, CheckReport).
// Decisions are FromFallback; a PROCEED to an Admit carries
// LocalAdmission. Memory: at most MaxEndpoints endpoints, the least
// recently used forgotten first. Safe for concurrent use.
type LocalEngine struct {
	p      LocalPolicy
	random func() float64
	mu     sync.Mutex
	lru    *list.List // of *endpointState, most recently used first
	byKey  map[string]*list.Element
}

const (
	lastChanceWindow = time.Second
	lastChanceMargin = 250 * time.Millisecond
	minHalfOpenWait  = 100 * time.Millisecond
)

type endpointState struct {
	key             string
	breaker         breaker
	previousDelay   time.Duration
	retryAfterUntil time.Time
}

// ctx is one decision's inputs.
type ctx struct {
	st           *endpointState
	now          time.Time
	deadline     time.Time // zero: none
	afterFailure bool
	attempt      int // the attempt the decision is about
}

type answer struct {
	verdict Verdict
	reason  Reason
	delay   time.Duration
	until   time.Time // DEFER
}

// NewLocalEngine decides on p with `random` (uniform in [0, 1)) as its
// source.
func NewLocalEngine(p LocalPolicy, random func() float64) *LocalEngine {
	return &LocalEngine{p: p, random: random, lru: list.New(), byKey: map[string]*list.Element{}}
}

// Admit decides an Admit at `now`.
func (e *LocalEngine) Admit(in AdmitRequest, now time.Time) Decision {
	e.mu.Lock()
	defer e.mu.Unlock()
	c := e.context(in.Endpoint, now, in.Deadline, false, in.Attempt)
	a := e.admitGates(c, in.Attempt)
	d := e.decision(a, c)
	if a.verdict == Proceed {
		d.Admission = LocalAdmission
	}
	return d
}

// Report decides a Report at `now` (for a failure: about attempt + 1).
func (e *LocalEngine) Report(in ReportRequest, now time.Time) Decision {
	e.mu.Lock()
	defer e.mu.Unlock()
	c := e.context(in.Endpoint, now, in.Deadline, true, in.Attempt+1)
	c.st.breaker.refresh(now)
	if in.Outcome == Success || in.Outcome == PermanentFailure {
		c.st.breaker.onAnswer(&e.p, now)
		c.attempt = in.Attempt
		if in.Outcome == Success {
			c.st.previousDelay = 0
			return e.decision(answer{verdict: Done, reason: Succeeded}, c)
		}
		return e.decision(answer{verdict: GiveUp, reason: NotRetryable}, c)
	}
	if in.RetryAfter != nil {
		ra := *in.RetryAfter
		if ra > e.p.RetryAfterMax {
			ra = e.p.RetryAfterMax
		}
		if until := now.Add(ra); until.After(c.st.retryAfterUntil) {
			c.st.retryAfterUntil = until
		}
	}
	if !(in.Outcome == RateLimited && in.RetryAfter != nil) { // pacing, not failing
		c.st.breaker.onFailure(&e.p, now, e.random)
	}
	return e.decision(e.failureGates(c), c)
}

// context finds (or makes) the endpoint's state, most recently used.
func (e *LocalEngine) context(key string, now, deadline time.Time, afterFailure bool, attempt int) *ctx {
	el, ok := e.byKey[key]
	if ok {
		e.lru.MoveToFront(el)
	} else {
		el = e.lru.PushFront(&endpointState{key: key})
		e.byKey[key] = el
		for e.lru.Len() > e.p.MaxEndpoints {
			last := e.lru.Back()
			delete(e.byKey, last.Value.(*endpointState).key)
			e.lru.Remove(last)
		}
	}
	return &ctx{st: el.Value.(*endpointState), now: now, deadline: deadline, afterFailure: afterFailure, attempt: attempt}
}

func (e *LocalEngine) admitGates(c *ctx, attempt int) answer {
	b := &c.st.breaker
	switch {
	case attempt > e.p.MaxAttempts:
		return answer{verdict: GiveUp, reason: AttemptsExhausted}
	case !c.deadline.IsZero() && c.now.After(c.deadline):
		return answer{verdict: GiveUp, reason: Deadline}
	}
	b.refresh(c.now)
	switch {
	case b.state == open:
		return e.park(c, CircuitOpen, b.openUntil)
	case attempt > 1 && c.st.retryAfterUntil.After(c.now):
		return e.park(c, RetryAfterWindow, c.st.retryAfterUntil)
	case b.state == halfOpen && !b.probeSlotFree(&e.p, c.now):
		return e.park(c, HalfOpenBusy, c.now.Add(maxDuration(minHalfOpenWait, e.p.Spread)))
	case b.state == halfOpen:
		b.probes++
		b.lastProbe = c.now
		return answer{verdict: Proceed, reason: HalfOpenProbe}
	case attempt > 1:
		return answer{verdict: Proceed, reason: Admitted}
	}
	return answer{verdict: Proceed, reason: InitialJitter, delay: e.uniform(0, e.p.InitialJitter)}
}

func (e *LocalEngine) failureGates(c *ctx) answer {
	b := &c.st.breaker
	switch {
	case c.attempt > e.p.MaxAttempts:
		return answer{verdict: GiveUp, reason: AttemptsExhausted}
	case b.state == open:
		return e.park(c, CircuitOpen, b.openUntil)
	case b.state == halfOpen && !b.probeSlotFree(&e.p, c.now):
		return e.park(c, HalfOpenBusy, c.now.Add(maxDuration(minHalfOpenWait, e.p.Spread)))
	}
	return e.retryDelay(c)
}

// retryDelay: the policy's backoff, or the Retry-After if longer, fitted
// before the deadline.
func (e *LocalEngine) retryDelay(c *ctx) answer {
	p := &e.p
	prev := minDuration(maxDuration(c.st.previousDelay, p.BackoffBase), maxDuration(p.BackoffBase, p.BackoffCap))
	policyDelay := minDuration(p.BackoffCap, e.uniform(p.BackoffBase, 3*prev))
	a := answer{verdict: Proceed, reason: Backoff, delay: policyDelay}
	raLeft := c.st.retryAfterUntil.Sub(c.now)
	if c.st.retryAfterUntil.IsZero() {
		raLeft = 0
	}
	if raLeft > 0 && raLeft >= policyDelay {
		a = answer{verdict: Proceed, reason: RetryAfter, delay: raLeft + e.uniform(0, p.Spread)}
	}
	a = e.fitBeforeDeadline(c, a)
	if a.verdict != GiveUp && raLeft <= 0 {
		c.st.previousDelay = policyDelay
	}
	return a
}

func (e *LocalEngine) fitBeforeDeadline(c *ctx, a answer) answer {
	if c.deadline.IsZero() {
		return a
	}
	left := c.deadline.Sub(c.now)
	room := left - lastChanceWindow
	base := e.p.BackoffBase
	switch {
	case a.reason == Backoff && a.delay > room && room > base:
		return answer{verdict: Proceed, reason: Backoff, delay: base + e.uniform(0, room-base)}
	case a.delay <= left:
		return a
	case left <= lastChanceWindow:
		return answer{verdict: GiveUp, reason: Deadline}
	}
	return answer{verdict: Proceed, reason: LastChance, delay: e.landing(c).Sub(c.now)}
}

// park: DEFER to about target, or the last chance before the deadline.
func (e *LocalEngine) park(c *ctx, reason Reason, target time.Time) answer {
	back := maxTime(target, c.now.Add(e.p.Spread/2)).Add(e.uniform(0, e.p.Spread))
	if c.deadline.IsZero() || !back.After(c.deadline) {
		return answer{verdict: Defer, reason: reason, until: back}
	}
	left := c.deadline.Sub(c.now)
	switch {
	case left <= 0 || (c.afterFailure && left <= lastChanceWindow):
		return answer{verdict: GiveUp, reason: Deadline}
	case left <= lastChanceWindow:
		return answer{verdict: Proceed, reason: LastChance}
	}
	return answer{verdict: Defer, reason: reason, until: e.landing(c)}
}

// landing: when a last-chance attempt is due, in the deadline's last
// second, at least lastChanceMargin before it.
func (e *LocalEngine) landing(c *ctx) time.Time {
	return c.deadline.Add(-lastChanceWindow).Add(e.uniform(0, lastChanceWindow-lastChanceMargin))
}

// uniform over [lo, hi): one draw, only when hi > lo.
func (e *LocalEngine) uniform(lo, hi time.Duration) time.Duration {
	if hi <= lo {
		return lo
	}
	return lo + seconds(e.random()*(hi-lo).Seconds())
}

func (e *LocalEngine) decision(a answer, c *ctx) Decision {
	d := Decision{Verdict: a.verdict, Reason: a.reason, Attempt: c.attempt, Delay: a.delay, Source: FromFallback}
	if a.verdict == Defer {
		d.DeferUntil = a.until
		d.DeferFor = maxDuration(0, a.until.Sub(c.now))
	}
	return d
}

func minDuration(a, b time.Duration) time.Duration {
	if a < b {
		return a
	}
	return b
}

func maxDuration(a, b time.Duration) time.Duration {
	if a > b {
		return a
	}
	return b
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
