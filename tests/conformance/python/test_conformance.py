"""The Python client against every conformance scenario
(tests/conformance/README.md): the real CoordinatorClient on a scripted
gRPC coordinator in this process, a fake clock, the contract's PRNG as the
fallback's uniform source, and RetryLoop run through a recorder. One test
per scenario; the PRNG against prng.json first."""

import glob
import json
import math
import os
import threading
from concurrent import futures
from typing import Any, Dict, Iterator, List, Optional

import grpc
import pytest

from stagger import (Attempt, AttemptResult, Canceller, CoordinatorClient,
                     Decision, InvalidArgument, LocalPolicy, LoopOptions,
                     Outcome, ProtocolError, RetryLoop, reason_name)
from stagger.proto import coordinator_pb2 as pb, coordinator_pb2_grpc

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
T0 = 1767225600.0
DEFAULT_ENDPOINT = "https://hooks.example.com"
CALL_DEADLINE = 0.05   # the contract's, for a scripted timeout
TOLERANCE = 1e-6


def load_scenarios() -> List[Dict[str, Any]]:
    out = []
    for path in sorted(glob.glob(os.path.join(ROOT, "scenarios", "*.json"))):
        with open(path, encoding="utf-8") as f:
            out.extend(json.load(f)["scenarios"])
    return out


SCENARIOS = load_scenarios()


def splitmix(seed: int) -> Iterator[float]:
    mask = (1 << 64) - 1
    state = seed & mask
    while True:
        state = (state + 0x9E3779B97F4A7C15) & mask
        z = state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & mask
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & mask
        z ^= z >> 31
        yield (z >> 11) / 2.0 ** 53


class FakeClock:
    def __init__(self) -> None:
        self._t = T0
        self._lock = threading.Lock()

    def now(self) -> float:
        with self._lock:
            return self._t

    def advance(self, seconds: float) -> None:
        with self._lock:
            self._t += seconds


def rel(t: Optional[float]) -> Optional[float]:
    return None if t is None else t - T0


def absolute(t: Optional[float]) -> Optional[float]:
    return None if t is None else T0 + t


# ---- the scripted coordinator ----------------------------------------------


def duration(seconds: float, out: Any) -> None:
    out.FromNanoseconds(round(seconds * 1e9))


def to_decision(d: Dict[str, Any], attempt: int) -> Any:
    out = pb.Decision(verdict=pb.Verdict.Value(d["verdict"]),
                      reason=pb.Reason.Value(d["reason"]), attempt=attempt,
                      admission=d.get("admission", 0),
                      wait_supported=d.get("wait_supported", False))
    if "delay" in d:
        duration(d["delay"], out.delay)
    if "defer_for" in d:
        duration(d["defer_for"], out.defer_for)
    return out


class Script(coordinator_pb2_grpc.RetryCoordinatorServicer):
    """Answers each call with the next scripted answer."""

    def __init__(self) -> None:
        self.answers: List[Dict[str, Any]] = []
        self.dead = False
        self.clock = FakeClock()
        self.canceller = Canceller()
        self.problems: List[str] = []

    def Admit(self, req: Any, ctx: Any) -> Any:
        wait = (req.wait.ToNanoseconds() / 1e9) if req.HasField("wait") else 0
        d = self.answer(ctx, req.attempt, wait, report_failure=False)
        return pb.AdmitResponse(decision=d)

    def Report(self, req: Any, ctx: Any) -> Any:
        failure = req.outcome not in (pb.SUCCESS, pb.PERMANENT_FAILURE)
        return pb.ReportResponse(
            decision=self.answer(ctx, req.attempt, 0, report_failure=failure))

    def answer(self, ctx: Any, attempt: int, wait: float,
               report_failure: bool) -> Any:
        if self.dead:
            ctx.abort(grpc.StatusCode.UNAVAILABLE, "scripted: dead")
        if not self.answers:
            self.problems.append("a call beyond the script (attempt %d)" % attempt)
            ctx.abort(grpc.StatusCode.UNAVAILABLE, "scripted: beyond the script")
        a = self.answers.pop(0)
        self.clock.advance(a.get("after", 0))
        if a.get("cancel"):
            self.canceller.cancel()
            if wait > 0:  # cut short: the client gives up the call
                done = threading.Event()
                ctx.add_callback(done.set)
                done.wait(10)
                ctx.abort(grpc.StatusCode.CANCELLED, "scripted: cancelled")
        if a.get("timeout"):
            self.clock.advance(wait + 1 if wait > 0 else CALL_DEADLINE)
            ctx.abort(grpc.StatusCode.DEADLINE_EXCEEDED, "scripted: timeout")
        if "error" in a:
            ctx.abort(getattr(grpc.StatusCode, a["error"]), a.get("message", "scripted"))
        d = a["decision"]
        bump = report_failure and d["verdict"] in ("PROCEED", "DEFER", "GIVE_UP")
        return to_decision(d, attempt + (1 if bump else 0))


@pytest.fixture(scope="module")
def server() -> Iterator[Any]:
    script = Script()
    srv = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
    coordinator_pb2_grpc.add_RetryCoordinatorServicer_to_server(script, srv)
    port = srv.add_insecure_port("127.0.0.1:0")
    srv.start()
    yield script, "127.0.0.1:%d" % port
    srv.stop(None).wait(10)


# ---- a delivery, recorded ---------------------------------------------------


def answer_of(d: Decision) -> Dict[str, Any]:
    out: Dict[str, Any] = {"verdict": d.verdict.name,
                           "reason": reason_name(d.reason),
                           "source": d.source.value}
    if d.verdict.name == "PROCEED":
        out["delay"] = d.delay
    if d.verdict.name == "DEFER":
        out["defer_for"] = d.defer_for
    return out


class Recorder:
    """The loop's coordinator: passes each call on and records it."""

    def __init__(self, client: CoordinatorClient, trace: List[Any]) -> None:
        self.client, self.trace = client, trace

    def admit(self, endpoint: str, attempt: int = 1, *,
              deadline: Optional[float] = None,
              first_attempt_time: Optional[float] = None,
              wait: Optional[float] = None,
              cancel: Optional[Canceller] = None) -> Decision:
        args = drop_none({"attempt": attempt, "wait": wait,
                          "deadline": rel(deadline),
                          "first_attempt_time": rel(first_attempt_time)})
        return self.call("admit", args, lambda: self.client.admit(
            endpoint, attempt, deadline=deadline,
            first_attempt_time=first_attempt_time, wait=wait, cancel=cancel))

    def report(self, endpoint: str, attempt: int, outcome: Outcome, *,
               admission: int = 0, retry_after: Optional[float] = None,
               deadline: Optional[float] = None,
               first_attempt_time: Optional[float] = None) -> Decision:
        args = drop_none({"attempt": attempt, "outcome": outcome.name,
                          "admission": admission, "retry_after": retry_after,
                          "deadline": rel(deadline),
                          "first_attempt_time": rel(first_attempt_time)})
        return self.call("report", args, lambda: self.client.report(
            endpoint, attempt, outcome, admission=admission,
            retry_after=retry_after, deadline=deadline,
            first_attempt_time=first_attempt_time))

    def call(self, kind: str, args: Dict[str, Any], fn: Any) -> Decision:
        try:
            d = fn()
        except InvalidArgument as e:
            self.trace.append([kind, args, {"error": "INVALID_ARGUMENT",
                                            "message": str(e)}])
            raise
        except Exception as e:
            self.trace.append([kind, args, {"error": type(e).__name__.upper()}])
            raise
        self.trace.append([kind, args, answer_of(d)])
        return d


def drop_none(d: Dict[str, Any]) -> Dict[str, Any]:
    return {k: v for k, v in d.items() if v is not None}


def make_send(delivery: Dict[str, Any], clock: FakeClock, cancel: Canceller,
              trace: List[Any], timeout: float) -> Any:
    sends = list(delivery.get("sends", []))

    def send(a: Attempt) -> AttemptResult:
        trace.append(["send", a.number])
        assert a.timeout == timeout, "attempt timeout %r" % a.timeout
        assert sends, "an attempt beyond the scripted sends"
        s = sends.pop(0)
        clock.advance(s.get("takes", 0))
        if s.get("cancel"):
            cancel.cancel()
        if s.get("fails") == "io":
            raise ConnectionResetError("scripted")
        if s.get("fails") == "timeout":
            raise TimeoutError("scripted")
        if "http" in s:
            return AttemptResult.from_http(s["http"], s.get("retry_after_header"),
                                           clock.now())
        return AttemptResult(Outcome[s["outcome"]], s.get("retry_after"))
    send.left = sends  # type: ignore[attr-defined]
    return send


def make_sleep(delivery: Dict[str, Any], clock: FakeClock,
               trace: List[Any]) -> Any:
    count = [0]

    def sleep(seconds: float, c: Canceller) -> bool:
        trace.append(["sleep", seconds])
        count[0] += 1
        if count[0] == delivery.get("cancel_in_sleep"):
            c.cancel()
            return False
        if c.cancelled:
            return False
        clock.advance(seconds)
        return True
    return sleep


def end_of(r: Any) -> Dict[str, Any]:
    out: Dict[str, Any] = {"end": r.end.value, "attempts_made": r.attempts_made,
                           "next_attempt": r.next_attempt}
    if r.end.value in ("GAVE_UP", "DEFERRED") and r.last_decision:
        out["reason"] = reason_name(r.last_decision.reason)
    if r.end.value == "DEFERRED":
        out["defer_for"] = r.defer_for
    if r.first_attempt_time is not None:
        out["first_attempt_time"] = rel(r.first_attempt_time)
    return out


def run_delivery(client: CoordinatorClient, script: Script,
                 delivery: Dict[str, Any]) -> List[Any]:
    trace: List[Any] = []
    o = delivery.get("options", {})
    cancel = Canceller()
    script.canceller = cancel
    if delivery.get("cancel_before"):
        cancel.cancel()
    timeout = o.get("attempt_timeout", 30.0)
    loop = RetryLoop(Recorder(client, trace), cancel, LoopOptions(
        deadline=absolute(o.get("deadline")), attempt_timeout=timeout,
        waiting=o.get("waiting", True),
        park_limit=o.get("park_limit", math.inf),
        sleep=make_sleep(delivery, script.clock, trace), clock=script.clock))
    send = make_send(delivery, script.clock, cancel, trace, timeout)
    try:
        r = loop.run(delivery.get("endpoint", DEFAULT_ENDPOINT), send,
                     first_attempt=o.get("first_attempt", 1),
                     first_attempt_time=absolute(o.get("first_attempt_time")))
        trace.append(["end", end_of(r)])
    except InvalidArgument as e:
        trace.append(["end", {"error": "INVALID_ARGUMENT", "message": str(e)}])
    except ProtocolError:
        trace.append(["end", {"error": "PROTOCOL"}])
    assert not send.left, "%d scripted sends not sent" % len(send.left)
    return trace


# ---- comparison -------------------------------------------------------------


def expected_end(e: Dict[str, Any]) -> Dict[str, Any]:
    """Python raises where the others end ERROR: only the error is kept."""
    if e.get("end") == "ERROR":
        return {k: e[k] for k in ("error", "message") if k in e}
    return e


def normalize(expected: List[Any]) -> List[Any]:
    out = []
    for ev in expected:
        if ev[0] in ("admit", "report") and "verdict" in ev[2]:
            a = dict(ev[2])
            a.setdefault("source", "coordinator")
            if a["verdict"] == "PROCEED":
                a.setdefault("delay", 0)
            ev = [ev[0], ev[1], a]
        if ev[0] == "end":
            ev = ["end", expected_end(ev[1])]
        out.append(ev)
    return out


def same(want: Any, got: Any) -> bool:
    if isinstance(want, dict) and set(want) == {"value", "range"}:
        want = want["value"]
    if isinstance(want, bool) or isinstance(got, bool):
        return want == got
    if isinstance(want, (int, float)) and isinstance(got, (int, float)):
        return abs(want - got) <= TOLERANCE
    if isinstance(want, dict) and isinstance(got, dict):
        return set(want) == set(got) and all(same(want[k], got[k]) for k in want)
    if isinstance(want, list) and isinstance(got, list):
        return len(want) == len(got) and all(map(same, want, got))
    return bool(want == got)


def policy_of(s: Dict[str, Any]) -> LocalPolicy:
    return LocalPolicy(**s.get("policy", {}))


@pytest.mark.parametrize("s", SCENARIOS, ids=[s["name"] for s in SCENARIOS])
def test_scenario(server: Any, s: Dict[str, Any]) -> None:
    script, target = server
    script.clock = FakeClock()
    script.problems = []
    script.dead = s["coordinator"] == "dead"
    script.answers = [] if script.dead else list(s["coordinator"])
    draws = splitmix(s.get("seed", 1))
    client = CoordinatorClient(target, call_deadline=5.0, clock=script.clock,
                               random=lambda: next(draws),
                               local_policy=policy_of(s))
    try:
        for k, delivery in enumerate(s["deliveries"]):
            got = run_delivery(client, script, delivery)
            want = normalize(delivery["trace"])
            assert same(want, got), "%s, delivery %d:\nwant %s\ngot  %s" % (
                s["name"], k + 1, json.dumps(want), json.dumps(got))
    finally:
        client.close()
    assert not script.problems, script.problems
    assert not script.answers, "%d scripted answers not used" % len(script.answers)


def test_prng_matches_prng_json() -> None:
    with open(os.path.join(ROOT, "prng.json"), encoding="utf-8") as f:
        seeds = json.load(f)["seeds"]
    for seed, draws in seeds.items():
        g = splitmix(int(seed))
        assert [next(g) for _ in draws] == draws, seed


def test_every_scenario_is_run() -> None:
    names = [s["name"] for s in SCENARIOS]
    assert len(names) == len(set(names)) and len(names) >= 60, len(names)
