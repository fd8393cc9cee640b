"""RetryLoop (stagger/loop.py) with a scripted coordinator on a fake clock:
every way a run ends, what each call carries (admission tokens, deadline,
first attempt time, wait and its limits), waiting admission after a DEFER
and after a failure (only with wait_supported), parking, cancellation, and
how the send callable's exceptions are reported."""

import dataclasses
import socket
import urllib.error
from typing import Any, List, Optional, Tuple

import pytest

from conftest import FakeClock, FakeSleep
from stagger import (Attempt, AttemptResult, Cancelled, Canceller, Decision,
                     LoopEnd, LoopOptions, Outcome, Reason, RetryLoop, Source,
                     Verdict)
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


def test_first_attempt_succeeds_and_echoes_its_admission():
    s = Script(proceed(Reason.INITIAL_JITTER, 0.03, admission=0xABCDEF), DONE)
    r, sleep, sent, clock = run(s, [OK])
    assert (r.end, r.attempts_made, r.reason) == (LoopEnd.SUCCEEDED, 1, None)
    assert sleep.sleeps == [0.03]
    assert sent == [Attempt(1, 10.0)]
    kind, n, kw = s.calls[1]
    assert (kind, n, kw["outcome"], kw["admission"]) == (
        "report", 1, Outcome.SUCCESS, 0xABCDEF)
    assert r.first_attempt_time == clock.now() and kw["first_attempt_time"] == clock.now()


def test_retries_sleep_their_backoff_without_wait_supported():
    s = Script(proceed(admission=5), proceed(Reason.BACKOFF, 0.4, attempt=2),
               proceed(attempt=2, admission=6), DONE)
    r, sleep, sent, _ = run(s, [FAIL, OK])
    assert r.end is LoopEnd.SUCCEEDED and r.attempts_made == 2
    assert 0.4 in sleep.sleeps
    assert s.kinds() == [("admit", 1, None), ("report", 1, None),
                         ("admit", 2, None), ("report", 2, None)]
    assert [kw["admission"] for k, _, kw in s.calls if k == "report"] == [5, 6]


def test_with_wait_supported_the_backoff_is_a_waiting_admit():
    s = Script(proceed(), proceed(Reason.BACKOFF, 0.4, 2, wait_supported=True),
               proceed(Reason.RELEASED, attempt=2), DONE)
    r, sleep, _, _ = run(s, [FAIL, OK])
    assert r.end is LoopEnd.SUCCEEDED
    assert s.kinds()[2] == ("admit", 2, 0.4)
    assert s.calls[2][2]["cancel"] is not None
    assert 0.4 not in sleep.sleeps


def test_a_backoff_over_the_wait_limit_is_slept():
    s = Script(proceed(), proceed(Reason.BACKOFF, 61.0, 2, wait_supported=True),
               proceed(attempt=2), DONE)
    _, sleep, _, _ = run(s, [FAIL, OK])
    assert s.kinds()[2] == ("admit", 2, None) and 61.0 in sleep.sleeps


def test_a_waiting_admit_decided_locally_still_owes_its_backoff():
    s = Script(proceed(), proceed(Reason.BACKOFF, 0.4, 2, wait_supported=True),
               proceed(attempt=2, source=Source.LOCAL), DONE)
    r, sleep, _, _ = run(s, [FAIL, OK])
    assert r.end is LoopEnd.SUCCEEDED
    assert s.kinds()[2] == ("admit", 2, 0.4) and 0.4 in sleep.sleeps


def test_a_defer_is_asked_again_waiting_and_a_waiting_defer_is_parked():
    s = Script(defer(5.0), defer(3.0), proceed(), DONE)
    r, sleep, _, _ = run(s, [OK])
    assert r.end is LoopEnd.SUCCEEDED
    assert s.kinds() == [("admit", 1, None), ("admit", 1, 5.0),
                         ("admit", 1, None), ("report", 1, None)]
    assert sleep.sleeps[0] == 3.0  # the waiting call's DEFER, parked


def test_the_wait_is_at_most_a_minute():
    s = Script(defer(120.0), proceed(), DONE)
    run(s, [OK])
    assert s.kinds()[1] == ("admit", 1, 60.0)


def test_a_failure_deferred_waits_on_the_next_attempt():
    s = Script(proceed(), defer(2.0, attempt=2), proceed(attempt=2), DONE)
    r, _, _, _ = run(s, [FAIL, OK])
    assert r.end is LoopEnd.SUCCEEDED
    assert s.kinds()[2] == ("admit", 2, 2.0)


def test_waiting_off_sleeps_like_the_cpp_loop():
    s = Script(defer(5.0), proceed(), proceed(Reason.BACKOFF, 0.4, 2,
                                              wait_supported=True),
               proceed(attempt=2), DONE)
    r, sleep, _, _ = run(s, [FAIL, OK], options=LoopOptions(waiting=False))
    assert r.end is LoopEnd.SUCCEEDED
    assert all(w is None for _, _, w in s.kinds())
    assert sleep.sleeps[:1] == [5.0] and 0.4 in sleep.sleeps


def test_a_server_deferring_for_nothing_cannot_spin_the_loop():
    canceller = Canceller()
    s = Script(*[defer(0.0)] * 50)
    s.on_admit = lambda kw: len(s.calls) >= 20 and canceller.cancel()
    r, sleep, _, _ = run(s, [], canceller=canceller)
    assert r.end is LoopEnd.CANCELLED
    assert sleep.sleeps and all(x >= MIN_PARK for x in sleep.sleeps)
    assert all(w is None for _, _, w in s.kinds())  # nothing to wait for


def test_a_park_over_the_limit_ends_the_run_deferred():
    s = Script(proceed(), defer(600.0, attempt=2), defer(590.0, attempt=2))
    r, _, _, _ = run(s, [FAIL], options=LoopOptions(park_limit=300))
    assert (r.end, r.next_attempt, r.reason) == (
        LoopEnd.DEFERRED, 2, Reason.CIRCUIT_OPEN)
    # ... and resumes where it stopped.
    s2 = Script(proceed(attempt=2), DONE)
    r2, _, _, _ = run(s2, [OK], first_attempt=r.next_attempt,
                      first_attempt_time=r.first_attempt_time)
    assert r2.end is LoopEnd.SUCCEEDED
    assert s2.calls[0][1] == 2
    assert s2.calls[0][2]["first_attempt_time"] == r.first_attempt_time


@pytest.mark.parametrize("answer", [Reason.ATTEMPTS_EXHAUSTED, Reason.DEADLINE,
                                    Reason.NOT_RETRYABLE])
def test_giving_up_says_why(answer):
    s = Script(proceed(), give_up(answer, 2))
    r, _, _, _ = run(s, [FAIL])
    assert (r.end, r.reason, r.next_attempt) == (LoopEnd.GAVE_UP, answer, 2)
    assert str(r) == "GAVE_UP (%s) after 1 attempt(s)" % answer.name


def test_every_call_carries_the_deadline_and_first_attempt_time():
    s = Script(proceed(), proceed(Reason.BACKOFF, 0.1, 2), proceed(attempt=2), DONE)
    r, _, _, _ = run(s, [FAIL, OK], options=LoopOptions(deadline=1767229999.0))
    assert all(kw["deadline"] == 1767229999.0 for _, _, kw in s.calls)
    assert all(kw["first_attempt_time"] == r.first_attempt_time
               for _, _, kw in s.calls[1:])
    assert s.calls[0][2]["first_attempt_time"] is None  # not sent yet


def test_cancelled_while_sleeping_before_an_attempt():
    canceller = Canceller()
    s = Script(proceed(), proceed(Reason.BACKOFF, 0.4, 2))
    clock = FakeClock()
    sleep = FakeSleep(clock)
    sleep.on_sleep = lambda seconds: seconds == 0.4 and canceller.cancel()
    loop = RetryLoop(s, canceller, LoopOptions(sleep=sleep, clock=clock))
    r = loop.run(EP, lambda a: FAIL)
    assert (r.end, r.next_attempt, r.attempts_made) == (LoopEnd.CANCELLED, 2, 1)


def test_cancelled_during_a_waiting_admit():
    s = Script(defer(30.0), Cancelled("cancelled while waiting"))
    r, _, sent, _ = run(s, [])
    assert (r.end, r.next_attempt, sent) == (LoopEnd.CANCELLED, 1, [])


def test_an_attempt_running_when_cancelled_is_reported():
    canceller = Canceller()
    s = Script(proceed(), proceed(Reason.BACKOFF, 0.2, 2))

    def send(a):
        canceller.cancel()
        return FAIL
    clock = FakeClock()
    loop = RetryLoop(s, canceller, LoopOptions(sleep=FakeSleep(clock), clock=clock))
    r = loop.run(EP, send)
    assert r.end is LoopEnd.CANCELLED and s.kinds()[-1] == ("report", 1, None)


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
