"""RetryLoop (stagger/loop.py) with a scripted coordinator on a fake clock,
in what is Python's own: how the send callable's exceptions are reported
(and a bug in it propagates), AttemptResult.from_http, str(result), and a
coordinator deferring for nothing that cannot spin the loop. The loop's
answers to each decision are tests/conformance/ (every client runs them).
"""

import dataclasses
import socket
import urllib.error
from typing import Any, List, Optional, Tuple

import pytest

from conftest import FakeClock, FakeSleep
from stagger import (Attempt, AttemptResult, Canceller, Decision, LoopEnd,
                     LoopOptions, Outcome, Reason, RetryLoop, Source, Verdict)
from stagger.loop import MIN_PARK

EP = "https://hooks.example.com"


def proceed(reason=Reason.ADMITTED, delay=0.0, attempt=1, admission=0,
            wait_supported=False, source=Source.COORDINATOR):
    return Decision(Verdict.PROCEED, reason, attempt, delay=delay,
                    admission=admission, wait_supported=wait_supported,
                    source=source,
                    fallback_cause="down" if source is Source.LOCAL else None)


def defer(seconds, reason=Reason.CIRCUIT_OPEN, attempt=1):
    return Decision(Verdict.DEFER, reason, attempt, defer_for=seconds)


def give_up(reason, attempt=1):
    return Decision(Verdict.GIVE_UP, reason, attempt)


DONE = Decision(Verdict.DONE, Reason.SUCCEEDED, 1)


class Script:
    """A coordinator answering from a list, recording every call as
    (kind, attempt, {keyword arguments})."""

    def __init__(self, *answers: Any) -> None:
        self.answers = list(answers)
        self.calls: List[Tuple[str, int, dict]] = []
        self.on_admit = lambda kw: None

    def _next(self) -> Decision:
        assert self.answers, "unexpected call: %s" % (self.calls[-1],)
        a = self.answers.pop(0)
        if isinstance(a, Exception):
            raise a
        return a

    def admit(self, endpoint, attempt=1, *, deadline=None,
              first_attempt_time=None, wait=None, cancel=None):
        kw = dict(deadline=deadline, first_attempt_time=first_attempt_time,
                  wait=wait, cancel=cancel)
        self.calls.append(("admit", attempt, kw))
        self.on_admit(kw)
        return self._next()

    def report(self, endpoint, attempt, outcome, *, admission=0,
               retry_after=None, deadline=None, first_attempt_time=None):
        self.calls.append(("report", attempt, dict(
            outcome=outcome, admission=admission, retry_after=retry_after,
            deadline=deadline, first_attempt_time=first_attempt_time)))
        return self._next()

    def kinds(self) -> List[Tuple[str, int, Optional[float]]]:
        return [(k, n, kw.get("wait")) for k, n, kw in self.calls]


def run(script, results=(), options=None, canceller=None, **kw):
    clock = FakeClock()
    sleep = FakeSleep(clock)
    opts = dataclasses.replace(options or LoopOptions(), sleep=sleep, clock=clock)
    sent: List[Attempt] = []
    outcomes = list(results)

    def send(a: Attempt) -> AttemptResult:
        sent.append(a)
        r = outcomes.pop(0)
        if isinstance(r, BaseException):
            raise r
        return r

    loop = RetryLoop(script, canceller or Canceller(), opts)
    return loop.run(EP, send, **kw), sleep, sent, clock


OK = AttemptResult(Outcome.SUCCESS)
FAIL = AttemptResult(Outcome.RETRYABLE_FAILURE)


def test_a_server_deferring_for_nothing_cannot_spin_the_loop():
    canceller = Canceller()
    s = Script(*[defer(0.0)] * 50)
    s.on_admit = lambda kw: len(s.calls) >= 20 and canceller.cancel()
    r, sleep, _, _ = run(s, [], canceller=canceller)
    assert r.end is LoopEnd.CANCELLED
    assert sleep.sleeps and all(x >= MIN_PARK for x in sleep.sleeps)
    assert all(w is None for _, _, w in s.kinds())  # nothing to wait for


@pytest.mark.parametrize("answer", [Reason.ATTEMPTS_EXHAUSTED, Reason.DEADLINE,
                                    Reason.NOT_RETRYABLE])
def test_giving_up_says_why(answer):
    s = Script(proceed(), give_up(answer, 2))
    r, _, _, _ = run(s, [FAIL])
    assert (r.end, r.reason, r.next_attempt) == (LoopEnd.GAVE_UP, answer, 2)
    assert str(r) == "GAVE_UP (%s) after 1 attempt(s)" % answer.name


@pytest.mark.parametrize("raised,reported", [
    (TimeoutError("read timed out"), Outcome.TIMEOUT),
    (socket.timeout("timed out"), Outcome.TIMEOUT),
    (urllib.error.URLError(TimeoutError("connect timed out")), Outcome.TIMEOUT),
    (ConnectionRefusedError(111, "refused"), Outcome.RETRYABLE_FAILURE),
    (ConnectionResetError(104, "reset"), Outcome.RETRYABLE_FAILURE),
])
def test_send_exceptions_are_reported(raised, reported):
    s = Script(proceed(), give_up(Reason.ATTEMPTS_EXHAUSTED, 2))
    run(s, [raised])
    assert s.calls[1][2]["outcome"] is reported


def test_a_bug_in_send_propagates():
    s = Script(proceed())
    with pytest.raises(ZeroDivisionError):
        run(s, [ZeroDivisionError()])
    with pytest.raises(TypeError):
        run(Script(proceed()), [Outcome.SUCCESS])


def test_from_http_maps_status_and_retry_after():
    s = Script(proceed(), give_up(Reason.ATTEMPTS_EXHAUSTED, 2))
    run(s, [AttemptResult.from_http(429, "7")])
    assert (s.calls[1][2]["outcome"], s.calls[1][2]["retry_after"]) == (
        Outcome.RATE_LIMITED, 7.0)
    r = AttemptResult.from_http(503, "Thu, 01 Jan 2026 00:00:30 GMT",
                                now=1767225600.0)
    assert r == AttemptResult(Outcome.RATE_LIMITED, 30.0)
