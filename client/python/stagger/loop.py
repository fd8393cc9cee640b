"""RetryLoop: one delivery's ask -> wait -> send -> report loop, driven by
the coordinator's decisions -- the C++ RetryLoop (client/retry_loop.h) with
waiting admission:

  admit(n) -> PROCEED(delay)  sleep delay, send attempt n, report(n, outcome,
                              admission of that admit)
  report   -> DONE            end SUCCEEDED
           -> PROCEED(d)      a failure: sleep d, then admit(n+1) -- or, once
                              the coordinator has shown wait_supported (and
                              d <= 60 s), admit(n+1, wait=d) at once instead
                              of sleeping, so it can let the retry go early
                              (RELEASED) when the endpoint recovers
  any      -> GIVE_UP         end GAVE_UP; result.reason says why
           -> DEFER(for)      admit again (same attempt) at once with
                              wait = defer_for (at most 60 s) and a call
                              deadline of wait + 1 s. A waiting call that
                              comes back DEFER is parked: slept until its
                              defer time (at least MIN_PARK), then asked
                              again -- so a server that ignores `wait`
                              never causes a hot loop. A park longer than
                              options.park_limit ends the run DEFERRED
                              instead (the caller parks the delivery in its
                              queue and resumes with result.next_attempt).
options.waiting=False turns waiting off (sleep, then ask, as the C++ loop).
A waiting Admit decided locally (the coordinator went away) still owes the
rest of its backoff: it is slept before the attempt goes.

The send callable gets an Attempt (its number, and the timeout the worker
must give its own HTTP call) and returns an AttemptResult
(AttemptResult.from_http maps a status and Retry-After). A receiver that
hangs is cut off by that timeout: raise TimeoutError (socket.timeout is
one; a urllib URLError whose reason is one counts) or return
AttemptResult(Outcome.TIMEOUT) -- reported as TIMEOUT. Any other OSError
(refused, reset) is reported as RETRYABLE_FAILURE. Other exceptions are the
callable's bug and propagate, the attempt unreported.

Cancellation (the Canceller) interrupts any sleep or waiting Admit at once
and ends the run CANCELLED before the next attempt is sent; an attempt
already running finishes and is reported. InvalidArgument (a bad endpoint
key, ...) propagates. The coordinator going away never ends a run: the
client decides locally (Decision.source LOCAL). Every call carries the
delivery's deadline and first attempt time.
Thread-safety: a RetryLoop holds no per-run state; share it between threads
if its options' callbacks are thread-safe.
"""

import dataclasses
import enum
import math
from typing import Callable, Optional, Protocol, Union

from stagger.cancel import Canceller
from stagger.clock import REAL_CLOCK, Clock
from stagger.decision import Decision, Outcome, Source, Verdict, reason_name
from stagger.errors import Cancelled
from stagger.http_outcome import outcome_from_http_status, parse_retry_after

MAX_WAIT = 60.0    # AdmitRequest.wait's limit
MIN_PARK = 0.01    # a DEFER is never slept for less


class Coordinator(Protocol):
    """What the loop needs (CoordinatorClient; tests script their own)."""

    def admit(self, endpoint: str, attempt: int = 1, *,
              deadline: Optional[float] = None,
              first_attempt_time: Optional[float] = None,
              wait: Optional[float] = None,
              cancel: Optional[Canceller] = None) -> Decision: ...

    def report(self, endpoint: str, attempt: int, outcome: Outcome, *,
               admission: int = 0, retry_after: Optional[float] = None,
               deadline: Optional[float] = None,
               first_attempt_time: Optional[float] = None) -> Decision: ...


@dataclasses.dataclass(frozen=True)
class Attempt:
    number: int      # 1 for the first attempt
    timeout: float   # seconds the send may take (the worker's own timeout)


@dataclasses.dataclass(frozen=True)
class AttemptResult:
    outcome: Outcome
    # The endpoint's Retry-After in seconds (parse_retry_after), if any.
    retry_after: Optional[float] = None

    @staticmethod
    def from_http(status: int, retry_after_header: Optional[str] = None,
                  now: Optional[float] = None) -> "AttemptResult":
        """The result of an HTTP exchange (http_outcome.py's table);
        `now`: when the response arrived (default: the wall clock)."""
        when = REAL_CLOCK.now() if now is None else now
        return AttemptResult(outcome_from_http_status(status),
                             parse_retry_after(retry_after_header, when))


SendFn = Callable[[Attempt], AttemptResult]
# Blocks up to `seconds` unless cancelled; True if the whole time passed.
SleepFn = Callable[[float, Canceller], bool]


class LoopEnd(enum.Enum):
    SUCCEEDED = "SUCCEEDED"  # an attempt succeeded
    GAVE_UP = "GAVE_UP"      # dead-letter it: result.reason says why
    DEFERRED = "DEFERRED"    # parked for longer than options.park_limit
    CANCELLED = "CANCELLED"  # the Canceller fired


@dataclasses.dataclass(frozen=True)
class LoopResult:
    end: LoopEnd
    attempts_made: int            # sends during this run
    next_attempt: int             # to resume with (DEFERRED, CANCELLED)
    last_decision: Optional[Decision]
    first_attempt_time: Optional[float]  # to resume with

    @property
    def reason(self) -> Optional[int]:
        """GAVE_UP / DEFERRED: the Reason of the decision that ended it."""
        if self.end in (LoopEnd.GAVE_UP, LoopEnd.DEFERRED) and self.last_decision:
            return self.last_decision.reason
        return None

    def __str__(self) -> str:
        why = "" if self.reason is None else " (%s)" % reason_name(self.reason)
        return "%s%s after %d attempt(s)" % (self.end.value, why,
                                             self.attempts_made)


@dataclasses.dataclass(frozen=True)
class DecisionEvent:
    call: str                   # "admit" or "report"
    attempt: int                # the attempt the call was about
    outcome: Optional[Outcome]  # report only
    wait: Optional[float]       # admit with waiting admission
    decision: Decision


@dataclasses.dataclass(frozen=True)
class LoopOptions:
    deadline: Optional[float] = None     # Unix seconds, for the delivery
    attempt_timeout: float = 10.0        # Attempt.timeout
    waiting: bool = True                 # waiting admission
    park_limit: float = math.inf         # longer parks end the run DEFERRED
    sleep: Optional[SleepFn] = None      # default: Canceller.wait
    clock: Optional[Clock] = None        # first_attempt_time, owed backoff
    on_decision: Optional[Callable[[DecisionEvent], None]] = None


@dataclasses.dataclass
class _Run:
    endpoint: str
    next_attempt: int
    first_attempt_time: Optional[float]
    attempts_made: int = 0
    last: Optional[Decision] = None

    def end(self, how: LoopEnd) -> LoopResult:
        return LoopResult(how, self.attempts_made, self.next_attempt,
                          self.last, self.first_attempt_time)


_Step = Union[DecisionEvent, LoopEnd]


def _is_timeout(e: OSError) -> bool:
    return (isinstance(e, TimeoutError) or
            isinstance(getattr(e, "reason", None), TimeoutError))


class RetryLoop:
    def __init__(self, coordinator: Coordinator,
                 canceller: Optional[Canceller] = None,
                 options: LoopOptions = LoopOptions()) -> None:
        self._c = coordinator
        self._cancel = canceller or Canceller()
        self._o = options
        self._clock = options.clock or REAL_CLOCK
        self._sleep_fn: SleepFn = options.sleep or (lambda s, c: c.wait(s))

    def run(self, endpoint: str, send: SendFn, *, first_attempt: int = 1,
            first_attempt_time: Optional[float] = None) -> LoopResult:
        """Delivers to `endpoint` until it succeeds, gives up, is deferred
        past park_limit or cancelled. A parked delivery resumes with
        first_attempt=result.next_attempt and its first_attempt_time."""
        r = _Run(endpoint, first_attempt, first_attempt_time)
        step = self._admit(r, first_attempt, None)
        while isinstance(step, DecisionEvent):
            ev, d = step, step.decision
            if self._o.on_decision:
                self._o.on_decision(ev)
            r.last = d
            if ev.call == "report" and ev.outcome is Outcome.SUCCESS:
                return r.end(LoopEnd.SUCCEEDED)
            r.next_attempt = ev.attempt if ev.call == "admit" else ev.attempt + 1
            if d.verdict is Verdict.GIVE_UP:
                return r.end(LoopEnd.GAVE_UP)
            if d.verdict is Verdict.DONE:  # CoordinatorClient never does this
                raise RuntimeError("coordinator answered DONE to a call that "
                                   "was not a success report: %s" % d)
            if d.verdict is Verdict.DEFER:
                step = self._after_defer(r, ev)
            elif ev.call == "report":
                step = self._after_failure(r, d)
            else:
                step = self._send(r, d, ev.attempt, send)
        return r.end(step)

    # ---- the steps -------------------------------------------------------

    def _after_defer(self, r: _Run, ev: DecisionEvent) -> _Step:
        d = ev.decision
        if self._o.waiting and ev.wait is None and d.defer_for > 0:
            return self._admit(r, r.next_attempt, min(d.defer_for, MAX_WAIT))
        if d.defer_for > self._o.park_limit:
            return LoopEnd.DEFERRED
        if not self._sleep(max(d.defer_for, MIN_PARK)):
            return LoopEnd.CANCELLED
        return self._admit(r, r.next_attempt, None)

    def _after_failure(self, r: _Run, d: Decision) -> _Step:
        """PROCEED(delay) to a failure report: the retry, after the delay."""
        if self._o.waiting and d.wait_supported and 0 < d.delay <= MAX_WAIT:
            started = self._clock.now()
            step = self._admit(r, r.next_attempt, d.delay)
            if (isinstance(step, DecisionEvent) and
                    step.decision.source is Source.LOCAL and
                    step.decision.verdict is Verdict.PROCEED):
                owed = d.delay - (self._clock.now() - started)
                if owed > 0 and not self._sleep(owed):
                    return LoopEnd.CANCELLED
            return step
        if not self._sleep(d.delay):
            return LoopEnd.CANCELLED
        return self._admit(r, r.next_attempt, None)

    def _send(self, r: _Run, d: Decision, attempt: int, send: SendFn) -> _Step:
        """PROCEED(delay) to an Admit: the attempt, after the delay."""
        if not self._sleep(d.delay):
            return LoopEnd.CANCELLED
        if attempt == 1 and r.first_attempt_time is None:
            r.first_attempt_time = self._clock.now()
        result = self._attempt(send, attempt)
        r.attempts_made += 1
        decision = self._c.report(
            r.endpoint, attempt, result.outcome, admission=d.admission,
            retry_after=result.retry_after, deadline=self._o.deadline,
            first_attempt_time=r.first_attempt_time)
        return DecisionEvent("report", attempt, result.outcome, None, decision)

    # ---- helpers ---------------------------------------------------------

    def _admit(self, r: _Run, attempt: int, wait: Optional[float]) -> _Step:
        try:
            decision = self._c.admit(
                r.endpoint, attempt, deadline=self._o.deadline,
                first_attempt_time=r.first_attempt_time, wait=wait,
                cancel=self._cancel if wait is not None else None)
        except Cancelled:
            return LoopEnd.CANCELLED
        return DecisionEvent("admit", attempt, None, wait, decision)

    def _attempt(self, send: SendFn, number: int) -> AttemptResult:
        try:
            result = send(Attempt(number, self._o.attempt_timeout))
        except OSError as e:
            return AttemptResult(Outcome.TIMEOUT if _is_timeout(e)
                                 else Outcome.RETRYABLE_FAILURE)
        if not isinstance(result, AttemptResult):
            raise TypeError("send must return an AttemptResult, got %r"
                            % (result,))
        return result

    def _sleep(self, seconds: float) -> bool:
        return self._sleep_fn(seconds, self._cancel)
