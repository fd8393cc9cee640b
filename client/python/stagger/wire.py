"""The one conversion between the worker's values and stagger.v1 messages.

Requests: to_admit_request / to_report_request build the message from
Python values (durations in float seconds, instants in float Unix seconds;
None leaves an optional field unset). What a message cannot hold is refused
here with the message staggerd would give ("attempt: must be in [1,
1000000], got 4294967296", "endpoint: not valid UTF-8 at byte 3"), or, for
Python-only faults (a NaN, a wrong type), one naming the field. Everything
else is left to staggerd or to validation.py.

Decisions: from_wire turns a stagger.v1.Decision into a Decision, or None
when it is unusable (no verdict this package knows, a malformed duration):
the caller then treats the replica as failed. DEFER's instant is taken from defer_for on the client's clock
(defer_until only when defer_for is missing).
"""

from typing import Optional, cast

from google.protobuf.duration_pb2 import Duration
from google.protobuf.timestamp_pb2 import Timestamp

from stagger.decision import Decision, Reason, Source, Verdict
from stagger.durations import NANOS_PER_SECOND, to_nanos
from stagger.errors import InvalidArgument
from stagger.proto import coordinator_pb2 as pb
from stagger.validation import attempt_error, invalid_utf8_at

_INT32 = (-(2 ** 31), 2 ** 31 - 1)


def _endpoint(endpoint: str) -> str:
    if not isinstance(endpoint, str):
        raise InvalidArgument("endpoint: must be a str, got %s"
                              % type(endpoint).__name__)
    raw = endpoint.encode("utf-8", "surrogatepass")
    bad = invalid_utf8_at(raw)
    if bad is not None:
        raise InvalidArgument("endpoint: not valid UTF-8 at byte %d" % bad)
    return endpoint


def _attempt(attempt: int) -> int:
    if isinstance(attempt, bool) or not isinstance(attempt, int):
        raise InvalidArgument("attempt: must be an int, got %r" % (attempt,))
    if not _INT32[0] <= attempt <= _INT32[1]:
        raise InvalidArgument(str(attempt_error(attempt)))
    return attempt


def _duration(seconds: float, field: str, out: Duration) -> None:
    out.FromNanoseconds(to_nanos(seconds, field))


def _timestamp(seconds: float, field: str, out: Timestamp) -> None:
    ns = to_nanos(seconds, field)
    out.seconds, out.nanos = divmod(ns, NANOS_PER_SECOND)


def to_admit_request(endpoint: str, attempt: int, deadline: Optional[float],
                     first_attempt_time: Optional[float],
                     wait: Optional[float]) -> pb.AdmitRequest:
    req = pb.AdmitRequest(endpoint=_endpoint(endpoint),
                          attempt=_attempt(attempt))
    if deadline is not None:
        _timestamp(deadline, "deadline", req.deadline)
    if first_attempt_time is not None:
        _timestamp(first_attempt_time, "first_attempt_time",
                   req.first_attempt_time)
    if wait is not None:
        _duration(wait, "wait", req.wait)
    return req


def to_report_request(endpoint: str, attempt: int, outcome: int,
                      retry_after: Optional[float], admission: int,
                      deadline: Optional[float],
                      first_attempt_time: Optional[float]) -> pb.ReportRequest:
    if isinstance(outcome, bool) or not isinstance(outcome, int):
        raise InvalidArgument("outcome: must be an Outcome, got %r" % (outcome,))
    if not _INT32[0] <= outcome <= _INT32[1]:
        raise InvalidArgument("outcome: unknown value %d" % outcome)
    if not (isinstance(admission, int) and 0 <= admission < 2 ** 64):
        raise InvalidArgument("admission: must be a Decision.admission, "
                              "got %r" % (admission,))
    req = pb.ReportRequest(endpoint=_endpoint(endpoint),
                           attempt=_attempt(attempt), admission=admission)
    # Any int32: staggerd judges unknown values (the stub types it the enum).
    req.outcome = cast(pb.Outcome, int(outcome))
    if retry_after is not None:
        _duration(retry_after, "retry_after", req.retry_after)
    if deadline is not None:
        _timestamp(deadline, "deadline", req.deadline)
    if first_attempt_time is not None:
        _timestamp(first_attempt_time, "first_attempt_time",
                   req.first_attempt_time)
    return req


def seconds(d: Duration) -> float:
    return float(d.seconds + d.nanos / NANOS_PER_SECOND)


def from_wire(d: pb.Decision, now: float, replica: str) -> Optional[Decision]:
    """The decision as the worker uses it, or None if it is unusable."""
    try:
        verdict = Verdict(d.verdict)
    except ValueError:
        return None
    for field in ("delay", "defer_for"):
        dur = getattr(d, field)
        if (dur.seconds > 0 and dur.nanos < 0) or (dur.seconds < 0 and dur.nanos > 0):
            return None
    delay = max(0.0, seconds(d.delay)) if verdict is Verdict.PROCEED else 0.0
    defer_for, defer_until = 0.0, None
    if verdict is Verdict.DEFER:
        if d.HasField("defer_for"):
            defer_for = max(0.0, seconds(d.defer_for))
        elif d.HasField("defer_until"):
            until = d.defer_until.seconds + d.defer_until.nanos / NANOS_PER_SECOND
            defer_for = max(0.0, until - now)
        else:
            return None  # DEFER without a time
        defer_until = now + defer_for
    reason = Reason(d.reason) if d.reason in Reason._value2member_map_ else d.reason
    return Decision(verdict=verdict, reason=reason, attempt=d.attempt,
                    delay=delay, defer_for=defer_for, defer_until=defer_until,
                    admission=d.admission, wait_supported=d.wait_supported,
                    source=Source.COORDINATOR, replica=replica)
