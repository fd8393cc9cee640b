"""LocalEngine: how the client decides when neither stagger-agent nor any
coordinator replica answers (fail-open): docs/CLIENT_CONTRACT.md's
fallback subset of staggerd's engine, on LocalPolicy (staggerd's defaults),
over this process's view of each endpoint only:

  Admit(attempt):  attempt > max_attempts -> GIVE_UP(ATTEMPTS_EXHAUSTED);
                   past the deadline -> GIVE_UP(DEADLINE); breaker OPEN ->
                   DEFER(CIRCUIT_OPEN) until it half-opens; a retry inside
                   the endpoint's Retry-After window ->
                   DEFER(RETRY_AFTER_WINDOW); HALF_OPEN -> a probe
                   (PROCEED(HALF_OPEN_PROBE)) or DEFER(HALF_OPEN_BUSY); a
                   retry -> PROCEED(ADMITTED); a first attempt ->
                   PROCEED(INITIAL_JITTER, u * initial_jitter).
  Report(outcome): SUCCESS -> DONE(SUCCEEDED), PERMANENT_FAILURE ->
                   GIVE_UP(NOT_RETRYABLE) (both: the endpoint answered). A
                   failure remembers the Retry-After (clamped to
                   retry_after_max) and feeds the breaker (breaker.py; not a
                   429 that carried Retry-After); then for attempt + 1: the
                   attempt limit, the open or busy breaker, else PROCEED
                   after decorrelated jitter min(cap, base + u * (3 *
                   previous - base)) -- or after the Retry-After if that is
                   longer (RETRY_AFTER, + u * spread).
  Deferrals come back at max(target, now + spread/2) + u * spread; a wait
  that would cross the deadline becomes a last-chance attempt in the
  second before it, a backoff that would is redrawn within the time left,
  as the engine does.
Every u is one draw from the uniform source `random` ([0, 1)), taken in
the order above and only for a range of positive width: the contract
states the order, so a scripted source gives exact delays.
Not here (the coordinator's): the fleet-wide view, the retry budget, the
learned release pace, pauses, waiting Admits (answered at once).
Decisions are Source.LOCAL; a PROCEED to an Admit carries admission 1.
Requests must be valid (validation.py runs first). Memory: at most
policy.max_endpoints endpoints, the least recently used forgotten first.
Thread-safe (one lock).
"""

import collections
import dataclasses
import math
import threading
from typing import Callable, Optional, Tuple

from stagger.breaker import BreakerState, LocalBreaker
from stagger.clock import Clock
from stagger.decision import (LOCAL_ADMISSION, Decision, Outcome, Reason,
                              Source, Verdict)
from stagger.policy import LocalPolicy

LAST_CHANCE_WINDOW = 1.0    # engine kLastChanceWindow
LAST_CHANCE_MARGIN = 0.25   # engine kLastChanceMargin
MIN_HALF_OPEN_WAIT = 0.1    # engine kMinHalfOpenWait

# (verdict, reason, delay, defer_until)
_Answer = Tuple[Verdict, Reason, float, Optional[float]]


def _proceed(reason: Reason, delay: float) -> _Answer:
    return (Verdict.PROCEED, reason, delay, None)


def _give_up(reason: Reason) -> _Answer:
    return (Verdict.GIVE_UP, reason, 0.0, None)


@dataclasses.dataclass
class _Endpoint:
    breaker: LocalBreaker = dataclasses.field(default_factory=LocalBreaker)
    previous_delay: float = 0.0
    retry_after_until: float = -math.inf


@dataclasses.dataclass
class _Ctx:
    st: _Endpoint
    now: float
    deadline: float
    after_failure: bool


class LocalEngine:
    def __init__(self, policy: LocalPolicy, clock: Clock,
                 random: Callable[[], float]) -> None:
        self._p = policy
        self._clock = clock
        self._random = random
        self._lock = threading.Lock()
        self._endpoints: "collections.OrderedDict[str, _Endpoint]" = (
            collections.OrderedDict())

    def __len__(self) -> int:
        with self._lock:
            return len(self._endpoints)

    def admit(self, endpoint: str, attempt: int, deadline: Optional[float],
              cause: Optional[str] = None) -> Decision:
        with self._lock:
            c = self._ctx(endpoint, deadline, after_failure=False)
            a = self._admit_gates(c, attempt)
        return self._decision(a, attempt, c.now, cause, admit=True)

    def report(self, endpoint: str, attempt: int, outcome: Outcome,
               retry_after: Optional[float], deadline: Optional[float],
               cause: Optional[str] = None) -> Decision:
        with self._lock:
            c = self._ctx(endpoint, deadline, after_failure=True)
            c.st.breaker.refresh(c.now)
            if outcome in (Outcome.SUCCESS, Outcome.PERMANENT_FAILURE):
                c.st.breaker.on_answer(self._p, c.now)
                if outcome is Outcome.SUCCESS:
                    c.st.previous_delay = 0.0
                    a: _Answer = (Verdict.DONE, Reason.SUCCEEDED, 0.0, None)
                else:
                    a = _give_up(Reason.NOT_RETRYABLE)
                return self._decision(a, attempt, c.now, cause, admit=False)
            self._learn_failure(c, outcome, retry_after)
            a = self._failure_gates(c, attempt + 1)
        return self._decision(a, attempt + 1, c.now, cause, admit=False)

    # ---- state -----------------------------------------------------------

    def _ctx(self, endpoint: str, deadline: Optional[float],
             after_failure: bool) -> _Ctx:
        st = self._endpoints.get(endpoint)
        if st is None:
            st = self._endpoints[endpoint] = _Endpoint()
            while len(self._endpoints) > self._p.max_endpoints:
                self._endpoints.popitem(last=False)
        self._endpoints.move_to_end(endpoint)
        return _Ctx(st, self._clock.now(),
                    math.inf if deadline is None else deadline, after_failure)

    def _learn_failure(self, c: _Ctx, outcome: Outcome,
                       retry_after: Optional[float]) -> None:
        if retry_after is not None:
            ra = min(retry_after, self._p.retry_after_max)
            c.st.retry_after_until = max(c.st.retry_after_until, c.now + ra)
        paced = outcome is Outcome.RATE_LIMITED and retry_after is not None
        if not paced:  # a 429 with Retry-After is pacing, not failing
            c.st.breaker.on_failure(self._p, c.now, self._random)

    # ---- the gates -------------------------------------------------------

    def _admit_gates(self, c: _Ctx, attempt: int) -> _Answer:
        p, b = self._p, c.st.breaker
        if attempt > p.max_attempts:
            return _give_up(Reason.ATTEMPTS_EXHAUSTED)
        if c.now > c.deadline:
            return _give_up(Reason.DEADLINE)
        b.refresh(c.now)
        if b.state is BreakerState.OPEN:
            return self._park(c, Reason.CIRCUIT_OPEN, b.open_until)
        if attempt > 1 and c.st.retry_after_until > c.now:
            return self._park(c, Reason.RETRY_AFTER_WINDOW,
                              c.st.retry_after_until)
        if b.state is BreakerState.HALF_OPEN:
            if not b.probe_slot_free(p, c.now):
                return self._park(c, Reason.HALF_OPEN_BUSY,
                                  c.now + max(MIN_HALF_OPEN_WAIT, p.spread))
            b.take_probe(c.now)
            return _proceed(Reason.HALF_OPEN_PROBE, 0.0)
        if attempt > 1:
            return _proceed(Reason.ADMITTED, 0.0)
        return _proceed(Reason.INITIAL_JITTER, self._u(0, p.initial_jitter))

    def _failure_gates(self, c: _Ctx, next_attempt: int) -> _Answer:
        p, b = self._p, c.st.breaker
        if next_attempt > p.max_attempts:
            return _give_up(Reason.ATTEMPTS_EXHAUSTED)
        if b.state is BreakerState.OPEN:
            return self._park(c, Reason.CIRCUIT_OPEN, b.open_until)
        if (b.state is BreakerState.HALF_OPEN and
                not b.probe_slot_free(p, c.now)):
            return self._park(c, Reason.HALF_OPEN_BUSY,
                              c.now + max(MIN_HALF_OPEN_WAIT, p.spread))
        return self._retry_delay(c)

    def _retry_delay(self, c: _Ctx) -> _Answer:
        p = self._p
        previous = min(max(c.st.previous_delay, p.backoff_base),
                       max(p.backoff_base, p.backoff_cap))
        policy_delay = min(p.backoff_cap, self._u(p.backoff_base, previous * 3))
        a = _proceed(Reason.BACKOFF, policy_delay)
        ra_left = c.st.retry_after_until - c.now
        if 0 < ra_left and ra_left >= policy_delay:
            a = _proceed(Reason.RETRY_AFTER, ra_left + self._u(0, p.spread))
        a = self._fit_before_deadline(c, a)
        if a[0] is not Verdict.GIVE_UP and ra_left <= 0:
            c.st.previous_delay = policy_delay
        return a

    def _fit_before_deadline(self, c: _Ctx, a: _Answer) -> _Answer:
        left = c.deadline - c.now
        room = left - LAST_CHANCE_WINDOW
        base = self._p.backoff_base
        if a[1] is Reason.BACKOFF and a[2] > room and room > base:
            return _proceed(Reason.BACKOFF, base + self._u(0, room - base))
        if a[2] <= left:
            return a
        if left <= LAST_CHANCE_WINDOW:
            return _give_up(Reason.DEADLINE)
        return _proceed(Reason.LAST_CHANCE, self._landing(c) - c.now)

    def _park(self, c: _Ctx, reason: Reason, target: float) -> _Answer:
        spread = self._p.spread
        back = max(target, c.now + spread / 2) + self._u(0, spread)
        if back <= c.deadline:
            return (Verdict.DEFER, reason, 0.0, back)
        left = c.deadline - c.now
        if left <= 0 or (c.after_failure and left <= LAST_CHANCE_WINDOW):
            return _give_up(Reason.DEADLINE)
        if left <= LAST_CHANCE_WINDOW:
            return _proceed(Reason.LAST_CHANCE, 0.0)
        return (Verdict.DEFER, reason, 0.0, self._landing(c))

    def _landing(self, c: _Ctx) -> float:
        """When a last-chance attempt is due: in the deadline's last second,
        at least LAST_CHANCE_MARGIN before it."""
        return (c.deadline - LAST_CHANCE_WINDOW +
                self._u(0, LAST_CHANCE_WINDOW - LAST_CHANCE_MARGIN))

    def _u(self, lo: float, hi: float) -> float:
        """Uniform over [lo, hi): one draw, only when hi > lo."""
        return lo + self._random() * (hi - lo) if hi > lo else lo

    @staticmethod
    def _decision(a: _Answer, attempt: int, now: float, cause: Optional[str],
                  admit: bool) -> Decision:
        verdict, reason, delay, until = a
        return Decision(
            verdict=verdict, reason=reason, attempt=attempt, delay=delay,
            defer_for=max(0.0, until - now) if until is not None else 0.0,
            defer_until=until,
            admission=LOCAL_ADMISSION if admit and verdict is Verdict.PROCEED
            else 0,
            source=Source.LOCAL, fallback_cause=cause)
