"""RetryLoop: one delivery's ask -> wait -> send -> report loop, driven by
the coordinator's decisions. The loop docs/CLIENT_CONTRACT.md states for
every client language (tests/conformance/ holds this one to it):

  admit(n)   PROCEED(d)  sleep d, send attempt n, report(n, outcome,
                         admission of that admit)
             DEFER(f)    park f (below), then admit(n) again
             GIVE_UP     end GAVE_UP (result.reason says why)
  report(n)  SUCCESS     end SUCCEEDED, whatever the answer
  (failure)  PROCEED(d)  back off d (below), then admit(n + 1)
             DEFER(f)    park f, then admit(n + 1)
             GIVE_UP     end GAVE_UP
  DONE to anything but a success report raises ProtocolError.

Waiting admission (options.waiting, the default): when the answer came
from a coordinator that holds waiting calls (Decision.wait_supported), a
backoff d is waited through it -- admit(n + 1, wait=min(d, 60 s)), and
again for the rest when a PROCEED(ADMITTED) comes back at the end of that
wait with backoff still owed -- and a DEFER(f) is parked at it with
admit(n, wait=min(max(f, MIN_PARK), 60 s)). Otherwise the loop sleeps the
backoff, or max(f, MIN_PARK), then asks without waiting. A waiting admit
answered by the local fallback (the coordinator went away) first sleeps
the rest of what the coordinator's answer owed, then acts on the
fallback's answer. A run ends DEFERRED when the delivery would stay
parked longer than options.park_limit since the first DEFER of the
stretch (infinite by default; 0: every DEFER ends it, to park the delivery
in a queue and resume it with result.next_attempt and
result.first_attempt_time).

The send callable gets an Attempt (its number, and the timeout the worker
must give its own HTTP call, options.attempt_timeout: 30 s) and returns an
AttemptResult (AttemptResult.from_http maps a status and Retry-After). A
receiver that hangs is cut off by that timeout: raise TimeoutError
(socket.timeout is one; a urllib URLError whose reason is one counts) or
return AttemptResult(Outcome.TIMEOUT) -- reported as TIMEOUT. Any other
OSError (refused, reset) is reported as RETRYABLE_FAILURE. Other
exceptions are the callable's bug and propagate, the attempt unreported.

Cancellation (the Canceller) is checked before every sleep, admit and
send, and interrupts any sleep or waiting admit at once: the run ends
CANCELLED before the next attempt is sent. An attempt already running
finishes and is reported; a final answer is never turned into CANCELLED.
Errors raise (Python's idiom; the other languages end the run ERROR):
InvalidArgument for bad input (the coordinator's message, or the same
message from the local checks), ProtocolError for a broken answer. The
coordinator going away never ends a run: the client decides locally
(Decision.source LOCAL). Every call carries the delivery's deadline and
first attempt time.
Thread-safety: a RetryLoop holds no per-run state; share it between threads
if its options' callbacks are thread-safe.
"""

import dataclasses
import enum
import math
from typing import Callable, Optional, Protocol

from stagger.cancel import Canceller
from stagger.clock import REAL_CLOCK, Clock
from stagger.decision import Decision, Outcome, Reason, Source, Verdict, reason_name
from stagger.errors import Cancelled, ProtocolError, StaggerError
from stagger.http_outcome import outcome_from_http_status, parse_retry_after

MAX_WAIT = 60.0    # AdmitRequest.wait's limit
MIN_PARK = 0.01    # a DEFER is never waited or slept for less
DEFAULT_ATTEMPT_TIMEOUT = 30.0


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
    """What one attempt produced; named fields, all optional but the
    outcome, so more of what the endpoint said fits without changing
    callers."""
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
    DEFERRED = "DEFERRED"    # parked past options.park_limit
    CANCELLED = "CANCELLED"  # the Canceller fired


@dataclasses.dataclass(frozen=True)
class LoopResult:
    end: LoopEnd
    attempts_made: int            # sends during this run
    # The attempt to send next: one more than the last one sent, or the
    # run's first attempt if none was (resume DEFERRED / CANCELLED here).
    next_attempt: int
    last_decision: Optional[Decision]
    first_attempt_time: Optional[float]  # to resume with
    # SUCCEEDED: an error the success's report got, if any (the delivery
    # is done; log it).
    error: Optional[StaggerError] = None

    @property
    def reason(self) -> Optional[int]:
        """GAVE_UP / DEFERRED: the Reason of the decision that ended it."""
        if self.end in (LoopEnd.GAVE_UP, LoopEnd.DEFERRED) and self.last_decision:
            return self.last_decision.reason
        return None

    @property
    def defer_for(self) -> float:
        """DEFERRED: seconds to park the delivery; 0 otherwise."""
        if self.end is LoopEnd.DEFERRED and self.last_decision:
            return self.last_decision.defer_for
        return 0.0

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
    attempt_timeout: float = DEFAULT_ATTEMPT_TIMEOUT  # Attempt.timeout
    waiting: bool = True                 # waiting admission
    park_limit: float = math.inf         # longer parks end the run DEFERRED
    sleep: Optional[SleepFn] = None      # default: Canceller.wait
    clock: Optional[Clock] = None        # first_attempt_time, owed time
    on_decision: Optional[Callable[[DecisionEvent], None]] = None


class _Wait(enum.Enum):
    NONE = 0      # a plain admit
    BACKOFF = 1   # a waiting admit for a backoff
    PARK = 2      # a waiting admit for a DEFER


def _is_timeout(e: OSError) -> bool:
    return (isinstance(e, TimeoutError) or
            isinstance(getattr(e, "reason", None), TimeoutError))


class RetryLoop:
    def __init__(self, coordinator: Coordinator,
                 canceller: Optional[Canceller] = None,
                 options: LoopOptions = LoopOptions()) -> None:
        if not (options.attempt_timeout > 0 and
                math.isfinite(options.attempt_timeout)):
            raise ValueError("attempt_timeout: must be > 0 seconds, got %r"
                             % (options.attempt_timeout,))
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
        return _Run(self, endpoint, send, first_attempt,
                    first_attempt_time).go()


class _Run:
    """One delivery's run. Between steps, `d` answers `call` about
    `attempt` (admit: may it be sent; report: it finished with
    `outcome`), asked at `asked_at` with `wait` (kind `wait_kind`)."""

    def __init__(self, loop: RetryLoop, endpoint: str, send: SendFn,
                 first_attempt: int,
                 first_attempt_time: Optional[float]) -> None:
        self.loop, self.endpoint, self.send = loop, endpoint, send
        self.o = loop._o
        self.next_attempt = first_attempt
        self.first_attempt_time = first_attempt_time
        self.attempts_made = 0
        self.last: Optional[Decision] = None
        self.attempt = first_attempt
        self.call = "admit"
        self.outcome: Optional[Outcome] = None
        self.d: Optional[Decision] = None
        self.wait: Optional[float] = None
        self.wait_kind = _Wait.NONE
        self.asked_at = -math.inf
        self.not_before = -math.inf    # when the backoff or park ends
        self.parked_since = math.inf   # first DEFER of the stretch

    def go(self) -> LoopResult:
        end = self.ask(self.next_attempt, _Wait.NONE, None)
        while end is None:
            end = self.step()
        return end

    def result(self, how: LoopEnd,
               error: Optional[StaggerError] = None) -> LoopResult:
        return LoopResult(how, self.attempts_made, self.next_attempt,
                          self.last, self.first_attempt_time, error)

    # ---- the steps -------------------------------------------------------

    def step(self) -> Optional[LoopResult]:
        """Acts on the decision `d`; the result when the run has ended."""
        d = self.d
        assert d is not None
        if self.o.on_decision:
            self.o.on_decision(DecisionEvent(self.call, self.attempt,
                                             self.outcome, self.wait, d))
        self.last = d
        if self.call == "report" and self.outcome is Outcome.SUCCESS:
            return self.result(LoopEnd.SUCCEEDED)
        upcoming = self.attempt if self.call == "admit" else self.attempt + 1
        if d.verdict is Verdict.GIVE_UP:
            return self.result(LoopEnd.GAVE_UP)
        if d.verdict is Verdict.DONE:
            raise ProtocolError("coordinator answered DONE to a call that "
                                "was not a success report: %s" % d)
        if d.verdict is Verdict.DEFER:
            return self.park(d, upcoming)
        self.parked_since = math.inf  # a PROCEED ends a stretch
        if self.call == "report":
            return self.backoff(d, upcoming)
        return self.proceed(d)

    def backoff(self, d: Decision, upcoming: int) -> Optional[LoopResult]:
        """PROCEED(delay) to a failure report: the retry, after it."""
        self.not_before = self.now() + d.delay
        if self.waits(d) and d.delay > 0:
            return self.ask(upcoming, _Wait.BACKOFF, min(d.delay, MAX_WAIT))
        if not self.sleep(d.delay):
            return self.result(LoopEnd.CANCELLED)
        return self.ask(upcoming, _Wait.NONE, None)

    def park(self, d: Decision, upcoming: int) -> Optional[LoopResult]:
        """DEFER: park, then ask again; or end past the park limit."""
        if not self.sleep_owed(d):
            return self.result(LoopEnd.CANCELLED)
        now = self.now()
        if self.parked_since == math.inf:
            self.parked_since = now
        park = max(d.defer_for, MIN_PARK)
        if now + park - self.parked_since > self.o.park_limit:
            return self.result(LoopEnd.DEFERRED)
        self.not_before = now + park
        if self.waits(d):
            return self.ask(upcoming, _Wait.PARK, min(park, MAX_WAIT))
        if not self.sleep(park):
            return self.result(LoopEnd.CANCELLED)
        return self.ask(upcoming, _Wait.NONE, None)

    def proceed(self, d: Decision) -> Optional[LoopResult]:
        """PROCEED(delay) to an admit: the delay, the attempt, its report;
        or, at the end of a waiting backoff with backoff still owed, wait
        again for the rest."""
        if not self.sleep_owed(d):
            return self.result(LoopEnd.CANCELLED)
        now = self.now()
        if (self.wait_kind is _Wait.BACKOFF and self.wait is not None and
                d.source is Source.COORDINATOR and
                d.reason == Reason.ADMITTED and
                now >= self.asked_at + self.wait and self.not_before > now):
            return self.ask(self.attempt, _Wait.BACKOFF,
                            min(self.not_before - now, MAX_WAIT))
        if not self.sleep(d.delay) or self.loop._cancel.cancelled:
            return self.result(LoopEnd.CANCELLED)
        return self.send_attempt(d)

    def send_attempt(self, d: Decision) -> Optional[LoopResult]:
        n = self.attempt
        if n == 1 and self.first_attempt_time is None:
            self.first_attempt_time = self.now()
        result = self.run_send(n)
        self.attempts_made += 1
        self.next_attempt = n + 1
        self.call, self.outcome = "report", result.outcome
        self.wait, self.wait_kind = None, _Wait.NONE
        try:
            self.d = self.loop._c.report(
                self.endpoint, n, result.outcome, admission=d.admission,
                retry_after=result.retry_after, deadline=self.o.deadline,
                first_attempt_time=self.first_attempt_time)
        except StaggerError as e:
            if result.outcome is Outcome.SUCCESS:  # delivered: done anyway
                return self.result(LoopEnd.SUCCEEDED, e)
            raise
        return None

    # ---- helpers ---------------------------------------------------------

    def sleep_owed(self, d: Decision) -> bool:
        """The local fallback answered a waiting admit: first the rest of
        what the coordinator's answer owed."""
        if self.wait is None or d.source is not Source.LOCAL:
            return True
        return self.sleep(self.not_before - self.now())

    def waits(self, d: Decision) -> bool:
        return (self.o.waiting and d.wait_supported and
                d.source is Source.COORDINATOR)

    def ask(self, attempt: int, kind: _Wait,
            wait: Optional[float]) -> Optional[LoopResult]:
        """admit(attempt), waiting `wait` when given; the result if the run
        is cancelled first or during it."""
        if self.loop._cancel.cancelled:
            return self.result(LoopEnd.CANCELLED)
        self.attempt, self.call, self.outcome = attempt, "admit", None
        self.wait, self.wait_kind, self.asked_at = wait, kind, self.now()
        try:
            self.d = self.loop._c.admit(
                self.endpoint, attempt, deadline=self.o.deadline,
                first_attempt_time=self.first_attempt_time, wait=wait,
                cancel=self.loop._cancel if wait is not None else None)
        except Cancelled:
            return self.result(LoopEnd.CANCELLED)
        return None

    def run_send(self, number: int) -> AttemptResult:
        try:
            result = self.send(Attempt(number, self.o.attempt_timeout))
        except OSError as e:
            return AttemptResult(Outcome.TIMEOUT if _is_timeout(e)
                                 else Outcome.RETRYABLE_FAILURE)
        if not isinstance(result, AttemptResult):
            raise TypeError("send must return an AttemptResult, got %r"
                            % (result,))
        return result

    def sleep(self, seconds: float) -> bool:
        """Sleeps `seconds` (nothing when <= 0); False if cancelled
        before or during the sleep."""
        if self.loop._cancel.cancelled:
            return False
        if seconds <= 0:
            return True
        return self.loop._sleep_fn(seconds, self.loop._cancel)

    def now(self) -> float:
        return self.loop._clock.now()
