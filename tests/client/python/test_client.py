"""CoordinatorClient against in-process fake coordinators (gRPC on loopback
ports and a Unix socket): the agent socket, deadlines of plain and waiting
calls, a slow or vanished replica (down, fallback, recheck on the fake
clock), INVALID_ARGUMENT raised, admission tokens and wait_supported,
unusable answers, sharding by owner and failover, a draining replica
skipped, cancelling a waiting call, dns:/// members, option checks."""

import os
import tempfile
import threading
import time

import grpc
import pytest

from conftest import FakeClock
from fake_coordinator import FakeCoordinator, admitted
from stagger import (Cancelled, Canceller, CoordinatorClient, InvalidArgument,
                     Member, Outcome, Reason, Source, Verdict)
from stagger.client import NOT_CALLED
from stagger.proto import coordinator_pb2 as pb, health_pb2
from stagger.rendezvous import Rendezvous

EP = "https://hooks.example.com/orders"


@pytest.fixture
def fakes():
    started = []

    def start(address="127.0.0.1:0"):
        f = FakeCoordinator(address)
        started.append(f)
        return f
    yield start
    for f in started:
        f.stop()


@pytest.fixture
def clients():
    made = []

    def make(target, **kw):
        # Calls that must reach the fake get time for a loaded machine;
        # the tests of deadlines set their own.
        kw.setdefault("call_deadline", 5.0)
        c = CoordinatorClient(target, **kw)
        made.append(c)
        return c
    yield make
    for c in made:
        c.close()


def until(what, predicate, timeout=20.0):
    """Polls `predicate` (real time) until it holds; generous timeout."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError("timed out waiting for " + what)


def test_an_agent_socket_is_one_member_and_tokens_are_echoed(fakes, clients):
    path = os.path.join(tempfile.mkdtemp(prefix="stagger-py-"), "agent.sock")
    agent = fakes("unix:" + path)
    c = clients("unix:" + path)
    assert c.replicas() == [Member("unix:" + path, "unix:" + path)]
    d = c.admit(EP, 1, deadline=1767225700.25, first_attempt_time=1767225600.5)
    assert (d.source, d.verdict, d.admission, d.replica) == (
        Source.COORDINATOR, Verdict.PROCEED, 42, "unix:" + path)
    req = agent.admits[0][0]
    assert (req.endpoint, req.attempt) == (EP, 1)
    assert (req.deadline.seconds, req.deadline.nanos) == (1767225700, 250000000)
    assert req.first_attempt_time.seconds == 1767225600
    assert not req.HasField("wait")
    r = c.report(EP, 1, Outcome.RETRYABLE_FAILURE, admission=d.admission,
                 retry_after=2.5)
    assert (r.verdict, r.reason, r.attempt, r.delay) == (
        Verdict.PROCEED, Reason.BACKOFF, 2, 0.2)
    sent = agent.reports[0][0]
    assert (sent.admission, sent.outcome, sent.retry_after.seconds,
            sent.retry_after.nanos) == (42, pb.RETRYABLE_FAILURE, 2, 500000000)


def test_every_call_has_a_deadline_and_a_waiting_one_wait_plus_a_second(fakes, clients):
    f = fakes()
    clock = FakeClock()
    c = clients(f.target, call_deadline=0.05, clock=clock)

    def arrived(calls, call):
        """What the server saw left of a call, from the first one that
        reached it in time (a loaded machine may lose a few)."""
        for _ in range(50):
            before = len(calls)
            call()
            clock.advance(1.0)  # a timed-out call marked it down: recheck
            if len(calls) > before and calls[-1][1] > 0:
                return calls[-1][1]
        raise AssertionError("no call reached the fake in time")
    # gRPC rounds the timeout it sends up a little.
    assert arrived(f.admits, lambda: c.admit(EP)) <= 0.06
    assert arrived(f.reports, lambda: c.report(EP, 1, Outcome.SUCCESS)) <= 0.06
    c.admit(EP, 2, wait=2.0)
    waiting_req, waiting = f.admits[-1]
    assert waiting_req.wait.seconds == 2 and 1.0 < waiting <= 3.01


def test_a_slow_coordinator_is_cut_off_and_rechecked(fakes, clients):
    f = fakes()
    clock = FakeClock()
    c = clients(f.target, clock=clock, call_deadline=2.0)
    f.admit_answer = f.hold
    d = c.admit(EP)
    assert d.source is Source.LOCAL and "DEADLINE_EXCEEDED" in d.fallback_cause
    assert (d.verdict, d.reason, d.admission) == (
        Verdict.PROCEED, Reason.INITIAL_JITTER, 1)
    assert not c.coordinator_up
    d = c.report(EP, 1, Outcome.SUCCESS)  # not called: decided locally
    assert (d.source, d.fallback_cause, d.verdict) == (Source.LOCAL, NOT_CALLED,
                                                       Verdict.DONE)
    assert len(f.admits) == 1 and not f.reports
    f.admit_answer = admitted
    clock.advance(1.0)  # the recheck interval: one call probes it
    d = c.admit(EP)
    assert d.source is Source.COORDINATOR and c.coordinator_up


def test_invalid_argument_is_raised_not_masked(fakes, clients):
    f = fakes()
    c = clients(f.target)
    f.admit_answer = lambda req, ctx: ctx.abort(
        grpc.StatusCode.INVALID_ARGUMENT, "attempt: server says no")
    with pytest.raises(InvalidArgument) as e:
        c.admit(EP)
    assert str(e.value) == "attempt: server says no"
    assert c.coordinator_up
    # Bad input the message cannot even carry is refused before any call.
    with pytest.raises(InvalidArgument) as e:
        c.admit(EP, 2 ** 32)
    assert str(e.value) == "attempt: must be in [1, 1000000], got 4294967296"
    with pytest.raises(InvalidArgument) as e:
        c.admit(EP, wait=float("nan"))
    assert str(e.value) == "wait: must be a finite number of seconds, got nan"
    with pytest.raises(InvalidArgument) as e:
        c.admit("a\udcffb")
    assert str(e.value) == "endpoint: not valid UTF-8 at byte 1"
    assert len(f.admits) == 1


def test_wait_supported_and_done_are_the_answers_own(fakes, clients):
    f = fakes()
    c = clients(f.target, clock=FakeClock())

    def supporting(req, ctx):
        resp = admitted(req, ctx)
        resp.decision.wait_supported = True
        return resp
    f.admit_answer = supporting
    assert c.admit(EP).wait_supported
    f.admit_answer = admitted
    assert not c.admit(EP).wait_supported  # each answer says so itself
    # DONE to an admit is passed on (the loop raises ProtocolError).
    f.admit_answer = lambda req, ctx: pb.AdmitResponse(
        decision=pb.Decision(verdict=pb.DONE, reason=pb.SUCCEEDED))
    d = c.admit(EP)
    assert (d.verdict, d.source) == (Verdict.DONE, Source.COORDINATOR)


@pytest.mark.parametrize("answer", [
    pb.AdmitResponse(),
    pb.AdmitResponse(decision=pb.Decision(verdict=9)),
    pb.AdmitResponse(decision=pb.Decision(verdict=pb.DEFER)),
], ids=["no decision", "unknown verdict", "DEFER no time"])
def test_unusable_answers_fall_back(fakes, clients, answer):
    f = fakes()
    c = clients(f.target, clock=FakeClock())
    f.admit_answer = lambda req, ctx: answer
    d = c.admit(EP)
    assert d.source is Source.LOCAL
    assert d.fallback_cause.endswith("answered no usable decision")


def test_defer_times_are_taken_relative(fakes, clients):
    f = fakes()
    clock = FakeClock()
    c = clients(f.target, clock=clock)

    def deferring(req, ctx):
        d = pb.Decision(verdict=pb.DEFER, reason=pb.CIRCUIT_OPEN, attempt=1)
        d.defer_for.FromMilliseconds(1500)
        d.defer_until.FromSeconds(5)  # a server clock far away: ignored
        return pb.AdmitResponse(decision=d)
    f.admit_answer = deferring
    d = c.admit(EP)
    assert (d.verdict, d.defer_for, d.defer_until) == (
        Verdict.DEFER, 1.5, clock.now() + 1.5)


def test_keys_go_to_their_owner_and_move_only_while_it_is_down(fakes, clients):
    fs = {name: fakes() for name in ("a", "b", "c")}
    clock = FakeClock()
    c = clients(",".join("%s=%s" % (n, f.target) for n, f in fs.items()),
                clock=clock)
    ring = Rendezvous(["a", "b", "c"])
    keys = ["https://tenant-%d.example/" % i for i in range(40)]

    def landed(key):
        before = {n: len(f.admits) for n, f in fs.items()}
        d = c.admit(key)
        hit = [n for n, f in fs.items() if len(f.admits) > before[n]]
        return d, hit
    for key in keys:
        d, hit = landed(key)
        owner = ring.names[ring.owner(key)]
        assert hit == [owner] and d.replica == owner
        assert c.owner_of(key).name == owner
    fs["b"].stop()
    b_keys = [k for k in keys if ring.names[ring.owner(k)] == "b"]
    d, _ = landed(b_keys[0])  # finds b gone: decided locally
    assert d.source is Source.LOCAL and "UNAVAILABLE" in d.fallback_cause
    for key in keys:
        d, hit = landed(key)
        rank = [ring.names[i] for i in ring.rank(key)]
        assert hit == [rank[1] if rank[0] == "b" else rank[0]], key
        assert d.source is Source.COORDINATOR


def test_a_draining_replica_is_skipped_until_it_serves_again(fakes, clients):
    x, y = fakes(), fakes()
    c = clients("x=%s,y=%s" % (x.target, y.target))
    ring = Rendezvous(["x", "y"])
    key = next(k for k in ("k%d" % i for i in range(100))
               if ring.names[ring.owner(k)] == "x")
    assert c.admit(key).replica == "x"
    x.health = health_pb2.HealthCheckResponse.NOT_SERVING
    until("the key to move to y", lambda: c.admit(key).replica == "y")
    x.health = health_pb2.HealthCheckResponse.SERVING
    until("the key to come back to x", lambda: c.admit(key).replica == "x")


def test_a_waiting_admit_can_be_cancelled(fakes, clients):
    f = fakes()
    c = clients(f.target)
    f.admit_answer = f.hold
    canceller = Canceller()
    outcome = []

    def call():
        try:
            outcome.append(c.admit(EP, wait=30.0, cancel=canceller))
        except Cancelled as e:
            outcome.append(e)
    t = threading.Thread(target=call)
    t.start()
    until("the waiting call to arrive", lambda: f.admits)
    canceller.cancel()
    t.join(20)
    assert len(outcome) == 1 and isinstance(outcome[0], Cancelled)


def test_the_coordinator_going_away_never_raises(fakes, clients):
    f = fakes()
    c = clients(f.target, clock=FakeClock())
    assert c.admit(EP).source is Source.COORDINATOR
    f.stop()
    d = c.report(EP, 1, Outcome.RETRYABLE_FAILURE, admission=42)
    assert d.source is Source.LOCAL and d.verdict is Verdict.PROCEED
    assert c.admit(EP, 2).source is Source.LOCAL


def test_dns_members_follow_the_resolver(fakes, clients):
    a, b = fakes(), fakes()
    members = [Member("a", a.target)]
    c = clients("dns:///stagger.test:1234", dns_refresh=0.2,
                resolve_members=lambda host, port: (
                    list(members) if (host, port) == ("stagger.test", "1234")
                    else []))
    assert c.replicas() == [Member("a", a.target)]
    members.append(Member("b", b.target))
    until("b to join", lambda: len(c.replicas()) == 2)
    ring = Rendezvous(["a", "b"])
    for key in ("k%d" % i for i in range(20)):
        assert c.admit(key).replica == ring.names[ring.owner(key)]


@pytest.mark.parametrize("kw,message", [
    ({"target": ""}, "target: must not be empty"),
    ({"target": "a:1,b"}, 'target: entry 2 ("b"): expected host:port'),
    ({"call_deadline": 0}, "call_deadline: must be in (0, 60] seconds, got 0"),
    ({"recheck_interval": 7200}, "recheck_interval: must be in (0, 3600] seconds, got 7200"),
])
def test_options_are_checked(kw, message):
    kw.setdefault("target", "127.0.0.1:1")
    with pytest.raises(InvalidArgument) as e:
        CoordinatorClient(**kw)
    assert str(e.value) == message
