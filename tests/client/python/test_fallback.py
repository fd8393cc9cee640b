"""The local fallback engine (stagger/fallback.py) on a fake clock and a
seeded random source: first attempts, decorrelated jitter, the attempt
limit, the breaker's whole cycle, Retry-After, deadlines, bounded memory,
and LocalPolicy's checks."""

import random

import pytest

from conftest import FakeClock
from stagger import InvalidArgument, LocalPolicy, Outcome, Reason, Source, Verdict
from stagger.fallback import LocalEngine

EP = "https://hooks.example.com"
F = Outcome.RETRYABLE_FAILURE


def engine(**policy):
    clock = FakeClock()
    return LocalEngine(LocalPolicy(**policy), clock, random.Random(7).random), clock


def fail(e, attempt=1, outcome=F, retry_after=None, deadline=None, ep=EP):
    return e.report(ep, attempt, outcome, retry_after, deadline)


def test_first_attempt_is_jittered_and_admitted_locally():
    e, _ = engine()
    for _ in range(50):
        d = e.admit(EP, 1, None, cause="down")
        assert (d.verdict, d.reason) == (Verdict.PROCEED, Reason.INITIAL_JITTER)
        assert 0 <= d.delay < 0.05
        assert (d.admission, d.source, d.fallback_cause) == (1, Source.LOCAL, "down")


def test_a_retry_is_admitted_at_once():
    e, _ = engine()
    d = e.admit(EP, 2, None)
    assert (d.verdict, d.reason, d.delay, d.admission) == (
        Verdict.PROCEED, Reason.ADMITTED, 0.0, 1)


def test_decorrelated_jitter_grows_within_its_bounds_to_the_cap():
    e, _ = engine(consecutive_failures=1000, min_throughput=10 ** 9)
    previous = 0.0
    for _ in range(60):
        d = fail(e)
        assert (d.verdict, d.reason, d.attempt) == (Verdict.PROCEED, Reason.BACKOFF, 2)
        assert 0.2 <= d.delay <= min(30.0, 3 * max(0.2, previous)) + 1e-9
        assert d.admission == 0  # a report's PROCEED admits nothing
        previous = d.delay
    assert previous > 10  # it did grow towards the cap


def test_a_success_resets_the_backoff():
    e, _ = engine(consecutive_failures=1000, min_throughput=10 ** 9)
    for _ in range(30):
        fail(e)
    assert e.report(EP, 1, Outcome.SUCCESS, None, None).verdict is Verdict.DONE
    assert fail(e).delay <= 0.6


def test_success_and_permanent_failure_end_the_delivery():
    e, _ = engine()
    d = e.report(EP, 3, Outcome.SUCCESS, None, None)
    assert (d.verdict, d.reason, d.attempt) == (Verdict.DONE, Reason.SUCCEEDED, 3)
    d = e.report(EP, 3, Outcome.PERMANENT_FAILURE, None, None)
    assert (d.verdict, d.reason, d.attempt) == (Verdict.GIVE_UP, Reason.NOT_RETRYABLE, 3)


def test_the_attempt_limit():
    e, _ = engine()
    d = fail(e, attempt=8)
    assert (d.verdict, d.reason, d.attempt) == (
        Verdict.GIVE_UP, Reason.ATTEMPTS_EXHAUSTED, 9)
    assert e.admit(EP, 9, None).reason == Reason.ATTEMPTS_EXHAUSTED
    assert fail(e, attempt=7).verdict is Verdict.PROCEED


def test_the_breaker_opens_half_opens_probes_and_closes():
    e, clock = engine()
    for _ in range(19):
        assert fail(e).verdict is Verdict.PROCEED
    d = fail(e)  # the 20th in a row
    assert (d.verdict, d.reason) == (Verdict.DEFER, Reason.CIRCUIT_OPEN)
    assert d.defer_until == pytest.approx(clock.now() + d.defer_for)
    # Open for 0.25 s +-20%; deferrals come back spread over 1 s after it
    # (no sooner than half the spread from now).
    assert 0.5 <= d.defer_for <= 0.5 + 1.0
    assert e.admit(EP, 1, None).reason == Reason.CIRCUIT_OPEN
    clock.advance(0.31)  # past the open period: half-open
    probes = [e.admit(EP, 1, None) for _ in range(6)]
    assert [p.reason for p in probes] == [Reason.HALF_OPEN_PROBE] * 5 + [
        Reason.HALF_OPEN_BUSY]
    assert all(p.admission == 1 for p in probes[:5])
    for _ in range(3):
        e.report(EP, 1, Outcome.SUCCESS, None, None)
    assert e.admit(EP, 1, None).reason == Reason.INITIAL_JITTER  # closed


def test_a_failed_probe_reopens_the_breaker_for_longer():
    e, clock = engine()
    for _ in range(20):
        fail(e)
    clock.advance(0.31)
    assert e.admit(EP, 1, None).reason == Reason.HALF_OPEN_PROBE
    d = fail(e)
    assert d.reason == Reason.CIRCUIT_OPEN
    clock.advance(0.31)  # the second trip is 0.5 s +-20%: still open
    assert e.admit(EP, 1, None).reason == Reason.CIRCUIT_OPEN
    clock.advance(0.3)
    assert e.admit(EP, 1, None).reason == Reason.HALF_OPEN_PROBE


def test_probes_that_never_report_free_their_slots():
    e, clock = engine()
    for _ in range(20):
        fail(e)
    clock.advance(0.31)
    for _ in range(5):
        e.admit(EP, 1, None)
    assert e.admit(EP, 1, None).reason == Reason.HALF_OPEN_BUSY
    clock.advance(10)  # probe_timeout
    assert e.admit(EP, 1, None).reason == Reason.HALF_OPEN_PROBE


def test_retry_after_is_honoured_and_clamped_and_does_not_trip():
    e, clock = engine()
    for _ in range(25):  # a 429 with Retry-After paces, it does not fail
        d = fail(e, outcome=Outcome.RATE_LIMITED, retry_after=5.0)
    assert (d.verdict, d.reason) == (Verdict.PROCEED, Reason.RETRY_AFTER)
    assert 5.0 <= d.delay < 6.0
    assert e.admit(EP, 2, None).reason == Reason.RETRY_AFTER_WINDOW
    assert e.admit(EP, 1, None).reason == Reason.INITIAL_JITTER  # first: sent
    d = fail(e, outcome=Outcome.RATE_LIMITED, retry_after=100.0, ep="other")
    assert 30.0 <= d.delay < 31.0  # retry_after_max
    clock.advance(31)
    assert e.admit(EP, 2, None).reason == Reason.ADMITTED


def test_deadlines():
    e, clock = engine()
    now = clock.now()
    assert e.admit(EP, 1, now - 1).reason == Reason.DEADLINE
    # A retry that starts in time goes; one that cannot, after a failure
    # inside the last second, is given up (that was the last chance).
    assert fail(e, deadline=now + 0.7).reason == Reason.BACKOFF
    assert fail(e, deadline=now + 0.1).reason == Reason.DEADLINE
    # A Retry-After past the deadline: a last-chance attempt before it.
    d = fail(e, outcome=Outcome.RATE_LIMITED, retry_after=10, deadline=now + 5)
    assert (d.verdict, d.reason) == (Verdict.PROCEED, Reason.LAST_CHANCE)
    assert 4.0 <= d.delay < 4.75
    # A backoff that would cross the deadline is redrawn within the time left.
    e2, clock2 = engine(backoff_base=2.0, backoff_cap=3600.0,
                        consecutive_failures=1000, min_throughput=10 ** 9)
    for _ in range(20):
        fail(e2)
    d = fail(e2, deadline=clock2.now() + 4)
    assert (d.reason, d.verdict) == (Reason.BACKOFF, Verdict.PROCEED)
    assert 2.0 <= d.delay < 3.0


def test_memory_is_bounded_least_recently_used_first():
    e, _ = engine(max_endpoints=10)
    for _ in range(20):
        fail(e, ep="kept")
    for i in range(100):
        e.admit("k%d" % i, 1, None)
        e.admit("kept", 2, None)  # used: kept
    assert len(e) == 10
    assert e.admit("kept", 1, None).reason == Reason.CIRCUIT_OPEN
    for _ in range(20):
        fail(e, ep="forgotten")
    for i in range(10):
        e.admit("n%d" % i, 1, None)
    assert e.admit("forgotten", 1, None).reason == Reason.INITIAL_JITTER


@pytest.mark.parametrize("fields,message", [
    ({"backoff_cap": 0}, "local_policy.backoff_cap: must be in [0.001, 3600], got 0"),
    ({"max_attempts": 101}, "local_policy.max_attempts: must be in [1, 100], got 101"),
    ({"spread": float("nan")}, "local_policy.spread: must be in [0, 600], got nan"),
    ({"backoff_base": 2.0, "backoff_cap": 1.0},
     "local_policy.backoff_cap: must be >= backoff_base (2.0), got 1.0"),
    ({"open_base": 2.0, "open_max": 1.0},
     "local_policy.open_max: must be >= open_base (2.0), got 1.0"),
    ({"close_after_successes": 6},
     "local_policy.close_after_successes: must be <= half_open_probes (5), got 6"),
])
def test_policy_checks_name_the_field(fields, message):
    with pytest.raises(InvalidArgument) as e:
        LocalPolicy(**fields).check()
    assert str(e.value) == message
