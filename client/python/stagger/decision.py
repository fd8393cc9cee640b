"""The vocabulary of decisions: Outcome, Verdict, Reason (the values of the
stagger.v1 enums of the same names, proto/stagger/v1/coordinator.proto),
where a decision came from (Source), and Decision itself.

Contract:
  * Enum values equal the proto's (tests/client/python/test_vectors.py
    holds every proto value to a member here).
  * Decision mirrors stagger.v1.Decision, in the worker's units: durations
    are float seconds, defer_until is an instant on the client's clock
    (float Unix seconds), converted from the answer's relative defer_for so
    the worker's and the server's clocks need not agree.
  * `admission` is the token to echo in the Report of the attempt this
    decision let go: the coordinator's for its PROCEED to an Admit, 1 for
    one decided locally (an attempt admitted without the coordinator), 0
    otherwise.
  * `wait_supported`: the coordinator that answered holds waiting Admits
    (AdmitRequest.wait); False for local decisions.
Immutable values.
"""

import dataclasses
import enum
from typing import Optional


class Outcome(enum.IntEnum):
    """What happened to one attempt (stagger.v1.Outcome)."""
    SUCCESS = 1
    RETRYABLE_FAILURE = 2   # 5xx, connection reset, connect error
    TIMEOUT = 3             # no answer within the worker's own timeout
    RATE_LIMITED = 4        # 429 / 503, usually with Retry-After
    PERMANENT_FAILURE = 5   # other 4xx: retrying cannot help


class Verdict(enum.IntEnum):
    """What to do (stagger.v1.Verdict)."""
    PROCEED = 1   # send after `delay`
    DEFER = 2     # not now: ask again (same attempt) at defer_until
    GIVE_UP = 3   # dead-letter the delivery; `reason` says why
    DONE = 4      # the success is recorded


class Reason(enum.IntEnum):
    """Why (stagger.v1.Reason); stable, machine-readable."""
    INITIAL_JITTER = 1
    BACKOFF = 2
    RETRY_AFTER = 3
    CIRCUIT_OPEN = 4
    HALF_OPEN_PROBE = 5
    BUDGET_EXHAUSTED = 6
    ATTEMPTS_EXHAUSTED = 7
    NOT_RETRYABLE = 8
    DEADLINE = 9
    SUCCEEDED = 10
    HALF_OPEN_BUSY = 11
    RETRY_AFTER_WINDOW = 12
    ADMITTED = 13
    PACED = 14
    LAST_CHANCE = 15
    PAUSED = 16
    RELEASED = 17
    ENDPOINT_DISABLED = 18


def reason_name(reason: int) -> str:
    """"CIRCUIT_OPEN", ...; a reason newer than this package as its number."""
    try:
        return Reason(reason).name
    except ValueError:
        return "REASON_%d" % reason


class Source(enum.Enum):
    """Where a decision came from."""
    COORDINATOR = "coordinator"  # staggerd or stagger-agent answered
    LOCAL = "local"              # decided in-process: see fallback_cause


# Decision.admission of an attempt admitted without the coordinator
# (ReportRequest.admission: "1 marks an attempt admitted without the
# coordinator ... never a probe").
LOCAL_ADMISSION = 1


@dataclasses.dataclass(frozen=True)
class Decision:
    verdict: Verdict
    # A Reason; an int for a reason newer than this package.
    reason: int
    # The attempt the decision is about (Admit: the request's; a failure
    # Report: attempt + 1).
    attempt: int
    # PROCEED: wait this long (seconds, >= 0) before sending.
    delay: float = 0.0
    # DEFER: ask again after this long (seconds, >= 0), i.e. at defer_until
    # (client clock, Unix seconds).
    defer_for: float = 0.0
    defer_until: Optional[float] = None
    admission: int = 0
    wait_supported: bool = False
    source: Source = Source.COORDINATOR
    # Source.LOCAL: why the coordinator did not decide (its error, or
    # "considered down" when it was not called).
    fallback_cause: Optional[str] = None
    # The replica (member name) that answered; None for local decisions.
    replica: Optional[str] = None

    def __str__(self) -> str:
        text = "%s(%s) attempt %d" % (self.verdict.name,
                                      reason_name(self.reason), self.attempt)
        if self.verdict is Verdict.PROCEED:
            text += " delay %.3fs" % self.delay
        elif self.verdict is Verdict.DEFER:
            text += " for %.3fs" % self.defer_for
        if self.source is Source.LOCAL:
            text += " [local: %s]" % self.fallback_cause
        return text
