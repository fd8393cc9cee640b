"""The Python client against the real staggerd (STAGGERD, the CMake target's
file): first attempts through RetryLoop (also over a Unix socket, as to a
stagger-agent), an endpoint failing through the breaker (a waiting Admit
held by staggerd for its whole wait, and a run cancelled while its waiting
re-ask is held), Retry-After honoured fleet-wide, a hanging receiver cut off
by the worker's timeout and reported TIMEOUT, every validation vector
answered as the vectors file says, and staggerd killed mid-delivery:
fallback decisions, no exception, every delivery finishes, and the calls
return to staggerd once it is back; and client/python/README.md's worker
run as written. Real time, loopback and Unix sockets only; no upper bounds
on time."""

import dataclasses
import os
import socket
import tempfile
import threading
import time
import urllib.request
from typing import List, Optional

import grpc
import pytest
from google.protobuf import json_format

from conftest import expand, load_vectors
from staggerd_harness import Staggerd
from stagger import (AttemptResult, Canceller, CoordinatorClient, DecisionEvent,
                     InvalidArgument, LoopEnd, LoopOptions, Outcome, Reason,
                     RetryLoop, Source, Verdict)
from stagger.proto import coordinator_pb2 as pb, coordinator_pb2_grpc

BINARY = os.environ.get("STAGGERD", "")
pytestmark = pytest.mark.skipif(not BINARY, reason="STAGGERD is not set")

OK = AttemptResult(Outcome.SUCCESS)
FAIL = AttemptResult(Outcome.RETRYABLE_FAILURE)


@pytest.fixture
def staggerd():
    started: List[Staggerd] = []

    def start(address="127.0.0.1:0", config=None):
        s = Staggerd(BINARY, address, config)
        started.append(s)
        return s
    yield start
    for s in started:
        s.stop()


@pytest.fixture
def client():
    made: List[CoordinatorClient] = []

    def make(target, **kw):
        kw.setdefault("call_deadline", 10.0)  # a loaded CI machine
        c = CoordinatorClient(target, **kw)
        made.append(c)
        return c
    yield make
    for c in made:
        c.close()


@pytest.fixture(scope="module")
def shared():
    """One staggerd and a client of it for the tests that change no state
    (bad input) or only their own endpoints'."""
    s = Staggerd(BINARY)
    c = CoordinatorClient(s.target, call_deadline=10.0)
    yield s, c
    c.close()
    s.stop()


def recorded():
    events: List[DecisionEvent] = []
    return events, LoopOptions(on_decision=events.append)


def test_first_attempts(shared):
    c = shared[1]
    events, options = recorded()
    loop = RetryLoop(c, options=options)
    for i in range(5):
        r = loop.run("https://first-%d.example" % i, lambda a: OK)
        assert (r.end, r.attempts_made) == (LoopEnd.SUCCEEDED, 1)
    admits = [e.decision for e in events if e.call == "admit"]
    assert all(d.source is Source.COORDINATOR for d in admits)
    assert all((d.verdict, d.reason) == (Verdict.PROCEED, Reason.INITIAL_JITTER)
               for d in admits)
    assert all(0 <= d.delay < 0.05 for d in admits)
    assert [e.decision.reason for e in events if e.call == "report"] == [
        Reason.SUCCEEDED] * 5


def test_first_attempt_over_a_unix_socket(staggerd, client):
    path = os.path.join(tempfile.mkdtemp(prefix="stagger-py-"), "agent.sock")
    c = client(staggerd("unix:" + path).target)
    d = c.admit("https://agent.example")
    assert (d.source, d.reason) == (Source.COORDINATOR, Reason.INITIAL_JITTER)


def test_a_failing_endpoint_opens_the_breaker(staggerd, client, tmp_path):
    # Open for 10 minutes (default 250 ms): the test does not race it.
    config = tmp_path / "config.textproto"
    config.write_text("default_policy { breaker { open_base { seconds: 600 } "
                      "open_max { seconds: 600 } } }\n")
    c = client(staggerd(config=str(config)).target)
    ep = "https://down.example"
    answers = [c.report(ep, 1, Outcome.RETRYABLE_FAILURE) for _ in range(20)]
    assert all(d.source is Source.COORDINATOR for d in answers)
    assert [d.reason for d in answers[:19]] == [Reason.BACKOFF] * 19
    assert (answers[19].verdict, answers[19].reason) == (Verdict.DEFER,
                                                         Reason.CIRCUIT_OPEN)
    # A waiting Admit is held by staggerd for its whole wait (the breaker
    # stays open), then answered DEFER CIRCUIT_OPEN.
    started = time.monotonic()
    held = c.admit(ep, 1, wait=0.5)
    assert time.monotonic() - started >= 0.45
    assert (held.verdict, held.reason) == (Verdict.DEFER, Reason.CIRCUIT_OPEN)
    assert held.wait_supported
    # A new delivery: DEFER, asked again waiting, and held; cancelling the
    # run ends that waiting call at once, nothing sent.
    events, _ = recorded()
    canceller = Canceller()
    waiting = threading.Event()

    def on_decision(e):
        events.append(e)
        waiting.set()
    loop = RetryLoop(c, canceller, LoopOptions(on_decision=on_decision))
    threading.Thread(target=lambda: (waiting.wait(30), time.sleep(0.3),
                                     canceller.cancel())).start()
    r = loop.run(ep, lambda a: pytest.fail("sent through an open breaker"))
    assert (r.end, r.next_attempt, r.attempts_made) == (LoopEnd.CANCELLED, 1, 0)
    assert [(e.call, e.decision.reason) for e in events] == [
        ("admit", Reason.CIRCUIT_OPEN)]
    assert events[0].decision.wait_supported


def test_retry_after_is_honoured_fleet_wide(staggerd, client):
    c = client(staggerd().target)
    ep = "https://paced.example"
    slept: List[float] = []

    def sleep(seconds, canceller):
        slept.append(seconds)
        return canceller.wait(seconds)
    results = [AttemptResult(Outcome.RATE_LIMITED, retry_after=1.0), OK]
    events, _ = recorded()
    loop = RetryLoop(c, options=LoopOptions(sleep=sleep,
                                            on_decision=events.append))
    started = time.monotonic()
    r = loop.run(ep, lambda a: results.pop(0))
    assert (r.end, r.attempts_made) == (LoopEnd.SUCCEEDED, 2)
    report = events[1].decision
    assert (report.verdict, report.reason) == (Verdict.PROCEED, Reason.RETRY_AFTER)
    assert report.delay >= 1.0 and report.wait_supported
    # The retry is one waiting Admit for the whole Retry-After (nothing
    # slept for it), answered PROCEED when the window ran out.
    retry = events[2]
    assert (retry.call, retry.wait) == ("admit", report.delay)
    assert retry.decision.verdict is Verdict.PROCEED
    assert report.delay not in slept
    assert time.monotonic() - started >= 1.0
    # Another worker's retry inside the window is held back too. The
    # recovery above started a paced release, so this Retry-After is the
    # limiter's word: it pauses the release (PACED) rather than opening a
    # fleet-wide window (docs/API.md, "Learned release pace").
    c.report(ep, 1, Outcome.RATE_LIMITED, retry_after=30.0)
    d = c.admit(ep, 2)
    assert d.verdict is Verdict.DEFER
    assert d.reason in (Reason.RETRY_AFTER_WINDOW, Reason.PACED), d.reason


def test_a_hanging_receiver_is_cut_off_and_reported_as_timeout(staggerd, client):
    c = client(staggerd().target)
    hang = socket.socket()
    hang.bind(("127.0.0.1", 0))
    hang.listen(8)  # accepts connections, never answers
    url = "http://127.0.0.1:%d/hook" % hang.getsockname()[1]

    def send(attempt):
        urllib.request.urlopen(url, data=b"{}", timeout=attempt.timeout)
        return OK
    canceller = Canceller()
    events: List[DecisionEvent] = []

    def seen(e):
        events.append(e)
        if e.call == "report":
            canceller.cancel()  # one attempt is enough
    loop = RetryLoop(c, canceller, LoopOptions(attempt_timeout=0.3,
                                               on_decision=seen))
    r = loop.run("https://hangs.example", send)
    hang.close()
    assert (r.end, r.attempts_made, r.next_attempt) == (LoopEnd.CANCELLED, 1, 2)
    report = events[-1]
    assert (report.call, report.outcome) == ("report", Outcome.TIMEOUT)
    assert report.decision.source is Source.COORDINATOR
    assert (report.decision.verdict, report.decision.reason) == (
        Verdict.PROCEED, Reason.BACKOFF)


VALIDATION = load_vectors()["validation"]


@pytest.mark.parametrize("case", VALIDATION, ids=[c["name"] for c in VALIDATION])
def test_bad_input_is_answered_as_the_vectors_say(shared, case):
    target, c = shared[0].target, shared[1]
    cls = pb.AdmitRequest if case["call"] == "Admit" else pb.ReportRequest
    msg = json_format.ParseDict(expand(case["request"]), cls())
    with grpc.insecure_channel(target) as channel:
        stub = coordinator_pb2_grpc.RetryCoordinatorStub(channel)
        try:
            getattr(stub, case["call"])(msg, timeout=30)
            got = None
        except grpc.RpcError as e:
            assert e.code() is grpc.StatusCode.INVALID_ARGUMENT, e
            got = e.details()
    if case.get("pending_cpp"):
        assert got != case["error"], "holds in staggerd now: drop pending_cpp"
        pytest.skip("pending_cpp: staggerd does not make this check yet")
    assert got == case["error"]
    # ... and the client raises it as InvalidArgument, the same message.
    if case["call"] == "Admit":
        call = lambda: c.admit(msg.endpoint, msg.attempt,
                               wait=(msg.wait.ToNanoseconds() / 1e9
                                     if msg.HasField("wait") else None))
    else:
        call = lambda: c.report(msg.endpoint, msg.attempt, msg.outcome,
                                retry_after=(msg.retry_after.ToNanoseconds() / 1e9
                                             if msg.HasField("retry_after")
                                             else None))
    if got is None:
        assert call().source is Source.COORDINATOR
    else:
        with pytest.raises(InvalidArgument) as e:
            call()
        assert str(e.value) == got


def test_staggerd_killed_mid_delivery(staggerd, client):
    s = staggerd()
    port = int(s.target.rsplit(":", 1)[1])
    c = client(s.target, call_deadline=0.5)
    killed = threading.Event()
    kill_lock = threading.Lock()

    def send(attempt):
        # Every delivery's first attempt fails; the first of them to get
        # here kills staggerd while its attempt is out.
        if attempt.number == 1:
            with kill_lock:
                if not killed.is_set():
                    s.kill()
                    killed.set()
            return FAIL
        return OK
    results, errors, events = [], [], []

    def worker(i):
        loop = RetryLoop(c, Canceller(), LoopOptions(on_decision=events.append))
        try:
            for j in range(3):
                results.append(loop.run("https://k-%d-%d.example" % (i, j), send))
        except Exception as e:  # pragma: no cover - the failure we look for
            errors.append(e)
    threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors
    assert [r.end for r in results] == [LoopEnd.SUCCEEDED] * 12
    assert all(r.attempts_made == 2 for r in results)
    local = [e.decision for e in events if e.decision.source is Source.LOCAL]
    assert local, "no decision was made locally"
    assert all(d.fallback_cause for d in local)
    # Back: once staggerd answers again, calls return to it.
    s2 = staggerd("127.0.0.1:%d" % port)
    deadline = time.monotonic() + 60
    while c.admit("https://back.example").source is not Source.COORDINATOR:
        assert time.monotonic() < deadline, "never back on staggerd"
        time.sleep(0.2)
    assert s2.proc.poll() is None


def _readme_worker() -> str:
    """The code block under "## A worker" in client/python/README.md."""
    path = os.path.join(os.path.dirname(__file__), "..", "..", "..", "client",
                        "python", "README.md")
    with open(path, encoding="utf-8") as f:
        text = f.read()
    section = text.split("## A worker", 1)[1]
    return section.split("```python\n", 1)[1].split("```", 1)[0]


def test_the_readme_worker_delivers_and_dead_letters(staggerd):
    import http.server
    path = os.path.join(tempfile.mkdtemp(prefix="stagger-py-"), "agent.sock")
    staggerd("unix:" + path)

    class Receiver(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            self.rfile.read(int(self.headers["Content-Length"]))
            self.send_response(410 if self.path == "/gone" else 204)
            self.end_headers()

        def log_message(self, *args):
            pass
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    dead, parked = [], []

    @dataclasses.dataclass
    class Job:
        url: str
        body: bytes
        next_attempt: int = 1
        first: Optional[float] = None
    code = _readme_worker().replace("unix:/run/stagger/agent.sock", "unix:" + path)
    scope = {"Job": Job,
             "dead_letter": lambda job, why: dead.append((job.url, why)),
             "park": lambda job, seconds: parked.append(job.url)}
    try:
        exec(compile(code, "README.md", "exec"), scope)
        base = "http://127.0.0.1:%d" % server.server_address[1]
        scope["deliver"](Job(base + "/ok", b"{}"))
        scope["deliver"](Job(base + "/gone", b"{}"))
    finally:
        server.shutdown()
        scope["client"].close()
    assert dead == [(base + "/gone", "GAVE_UP (NOT_RETRYABLE) after 1 attempt(s)")]
    assert parked == []
