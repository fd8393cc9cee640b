package stagger

import (
	"math"
	"time"
)

// breaker is the local fallback's circuit breaker for one endpoint: the
// engine's (core/engine/circuit_breaker.h) as docs/CLIENT_CONTRACT.md's
// fallback subset states it, for this process's view of the endpoint.
//
//	CLOSED --ConsecutiveFailures in a row, or failures >= FailureRatio of
//	the attempts over the last Window (five slots of Window/5 numbered
//	from the Unix epoch) with at least MinThroughput of them--> OPEN for
//	min(OpenMax, OpenBase * 2^(trips-1)) * (0.8 + 0.4 u) --time-->
//	HALF_OPEN: HalfOpenProbes probes may go; CloseAfterSuccesses answers
//	close it (everything forgotten); a failure opens it again (one more
//	trip). Probes not reported within ProbeTimeout of the latest free
//	their slots.
//
// Every answer in HALF_OPEN counts as a probe's (the subset has no probe
// tokens). Not safe for concurrent use: the engine holds its lock.
type breakerState int

const (
	closed breakerState = iota
	open
	halfOpen
)

const windowSlots = 5

type slotCount struct{ attempts, failures int }

type breaker struct {
	state     breakerState
	openUntil time.Time // OPEN: when it half-opens
	lastProbe time.Time // HALF_OPEN: the latest probe's admission
	failures  int       // in a row, while CLOSED
	trips     int       // since it last closed
	probes    int       // HALF_OPEN: in flight
	successes int       // HALF_OPEN: probe successes
	window    map[int64]slotCount
}

func (b *breaker) refresh(now time.Time) {
	if b.state == open && !now.Before(b.openUntil) {
		b.state, b.probes, b.successes, b.lastProbe = halfOpen, 0, 0, now
	}
}

// probeSlotFree: HALF_OPEN, may a probe go now?
func (b *breaker) probeSlotFree(p *LocalPolicy, now time.Time) bool {
	if b.probes > 0 && now.Sub(b.lastProbe) >= p.ProbeTimeout {
		b.probes = 0 // the probes in flight never reported
	}
	free := b.probes+b.successes < p.HalfOpenProbes
	if free {
		b.lastProbe = now
	}
	return free
}

func (b *breaker) onAnswer(p *LocalPolicy, now time.Time) {
	switch b.state {
	case halfOpen:
		if b.probes > 0 {
			b.probes--
		}
		b.successes++
		if b.successes >= p.CloseAfterSuccesses {
			*b = breaker{}
		}
	case closed:
		b.failures = 0
		b.count(p, now, false)
	}
}

func (b *breaker) onFailure(p *LocalPolicy, now time.Time, u func() float64) {
	switch b.state {
	case open:
		return // sent before the trip: nothing new
	case closed:
		b.failures++
		attempts, failures := b.count(p, now, true)
		byRatio := attempts >= p.MinThroughput && float64(failures) >= p.FailureRatio*float64(attempts)
		if b.failures < p.ConsecutiveFailures && !byRatio {
			return
		}
	}
	b.trips = minInt(b.trips+1, 60)
	nominal := math.Min(p.OpenMax.Seconds(), p.OpenBase.Seconds()*math.Pow(2, float64(b.trips-1)))
	b.state = open
	b.openUntil = now.Add(seconds(nominal * (0.8 + 0.4*u())))
	b.failures, b.probes, b.successes, b.window = 0, 0, 0, nil
}

// count counts one attempt in now's slot; the window's sums.
func (b *breaker) count(p *LocalPolicy, now time.Time, failure bool) (int, int) {
	slotNs := int64(p.Window) / windowSlots
	slot := now.UnixNano() / slotNs
	if b.window == nil {
		b.window = map[int64]slotCount{}
	}
	for s := range b.window {
		if s <= slot-windowSlots {
			delete(b.window, s)
		}
	}
	c := b.window[slot]
	c.attempts++
	if failure {
		c.failures++
	}
	b.window[slot] = c
	attempts, failures := 0, 0
	for _, w := range b.window {
		attempts, failures = attempts+w.attempts, failures+w.failures
	}
	return attempts, failures
}

func minInt(a, b int) int {
	if a < b {
		return a
	}
	return b
}

// seconds converts float seconds to a Duration, rounded to the nanosecond.
func seconds(s float64) time.Duration { return time.Duration(math.Round(s * 1e9)) }
