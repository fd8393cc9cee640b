"""The Python client against tests/vectors/client_vectors.json, the vectors
the C++ code (client.ClientVectors.*) and the TypeScript client check too:
a change in one language that the others do not follow fails here or
there. Validation vectors go through validation.py directly and through a
CoordinatorClient whose coordinator is unreachable (the local fallback's
path), pending_cpp ones included."""

import pytest
from google.protobuf import json_format

from conftest import FakeClock, expand, load_vectors
from stagger import (CoordinatorClient, InvalidArgument, LocalPolicy, Outcome,
                     Reason, Verdict, endpoint_key_from_url,
                     outcome_from_http_status, parse_retry_after)
from stagger.durations import format_duration
from stagger.members import Member, parse_members
from stagger.proto import coordinator_pb2 as pb
from stagger.rendezvous import Rendezvous, stable_hash
from stagger.validation import admit_error, report_error

V = load_vectors()


def ids(cases, key):
    return [repr(expand(c[key]))[:60] for c in cases]


def test_every_section_is_there():
    for section in ("http_status", "retry_after", "endpoint_key", "validation",
                    "duration_text", "rendezvous", "stable_hash", "members",
                    "policy_defaults"):
        assert V[section], section


@pytest.mark.parametrize("case", V["http_status"], ids=ids(V["http_status"], "status"))
def test_http_status(case):
    assert outcome_from_http_status(case["status"]).name == case["outcome"]


RA = V["retry_after"]


@pytest.mark.parametrize("case", RA["cases"], ids=ids(RA["cases"], "header"))
def test_retry_after(case):
    got = parse_retry_after(expand(case["header"]), float(RA["now_unix_seconds"]))
    if case["ms"] is None:
        assert got is None
    else:
        assert got is not None and round(got * 1000) == case["ms"]


@pytest.mark.parametrize("case", V["endpoint_key"], ids=ids(V["endpoint_key"], "url"))
def test_endpoint_key(case):
    url, n = expand(case["url"]), case["path_segments"]
    if "key" in case:
        assert endpoint_key_from_url(url, n) == case["key"]
    else:
        with pytest.raises(InvalidArgument) as e:
            endpoint_key_from_url(url, n)
        assert str(e.value) == case["error"]


@pytest.mark.parametrize("case", V["members"], ids=ids(V["members"], "target"))
def test_members(case):
    if "error" in case:
        with pytest.raises(InvalidArgument) as e:
            parse_members(case["target"])
        assert str(e.value) == case["error"]
        return
    spec = parse_members(case["target"])
    assert spec.dns_host == case.get("dns_host", "")
    assert spec.dns_port == case.get("dns_port", "")
    assert list(spec.members) == [Member(m["name"], m["target"])
                                  for m in case.get("members", [])]


def _message(case):
    cls = pb.AdmitRequest if case["call"] == "Admit" else pb.ReportRequest
    return json_format.ParseDict(expand(case["request"]), cls())


VAL = V["validation"]


@pytest.mark.parametrize("case", VAL, ids=[c["name"] for c in VAL])
def test_validation_messages(case):
    msg = _message(case)
    check = admit_error if case["call"] == "Admit" else report_error
    assert check(msg) == case["error"]


@pytest.fixture(scope="module")
def offline_client():
    """A client whose coordinator cannot be reached: every call is decided
    locally (on a fake clock the dead replica is never probed again)."""
    with CoordinatorClient("unix:/nonexistent/stagger-vectors.sock",
                           clock=FakeClock()) as c:
        yield c


def _seconds(d):
    return d.seconds + d.nanos / 1e9


@pytest.mark.parametrize("case", VAL, ids=[c["name"] for c in VAL])
def test_validation_through_the_fallback(offline_client, case):
    msg = _message(case)
    if case["call"] == "Admit":
        call = lambda: offline_client.admit(
            msg.endpoint, msg.attempt,
            wait=_seconds(msg.wait) if msg.HasField("wait") else None)
    else:
        call = lambda: offline_client.report(
            msg.endpoint, msg.attempt, msg.outcome,
            retry_after=(_seconds(msg.retry_after)
                         if msg.HasField("retry_after") else None))
    if case["error"] is None:
        decision = call()
        assert decision.fallback_cause, decision
    else:
        with pytest.raises(InvalidArgument) as e:
            call()
        assert str(e.value) == case["error"]


@pytest.mark.parametrize("case", V["duration_text"],
                         ids=[c["text"] for c in V["duration_text"]])
def test_duration_text(case):
    ns = case["seconds"] * 1_000_000_000 + case["nanos"]
    assert format_duration(ns) == case["text"]


@pytest.mark.parametrize("case", V["rendezvous"], ids=ids(V["rendezvous"], "key"))
def test_rendezvous_owner(case):
    r = Rendezvous(case["replicas"])
    assert r.names[r.owner(expand(case["key"]))] == case["owner"]


@pytest.mark.parametrize("case", V["stable_hash"], ids=ids(V["stable_hash"], "input"))
def test_stable_hash(case):
    assert "%016x" % stable_hash(expand(case["input"])) == case["hash"]


def test_policy_defaults_are_the_engines():
    p, want = LocalPolicy(), V["policy_defaults"]
    ours = {
        "backoff.kind": "DECORRELATED_JITTER",
        "backoff.base_ms": p.backoff_base * 1000,
        "backoff.cap_ms": p.backoff_cap * 1000,
        "backoff.max_attempts": p.max_attempts,
        "backoff.initial_jitter_ms": p.initial_jitter * 1000,
        "backoff.retry_after_max_ms": p.retry_after_max * 1000,
        "backoff.horizon_ms": 0,
        "breaker.consecutive_failures": p.consecutive_failures,
        "breaker.failure_ratio": p.failure_ratio,
        "breaker.min_throughput": p.min_throughput,
        "breaker.window_ms": p.window * 1000,
        "breaker.open_base_ms": p.open_base * 1000,
        "breaker.open_max_ms": p.open_max * 1000,
        "breaker.half_open_probes": p.half_open_probes,
        "breaker.close_after_successes": p.close_after_successes,
        "breaker.probe_timeout_ms": p.probe_timeout * 1000,
        "deferral.spread_ms": p.spread * 1000,
        "limits.max_key_bytes": p.max_key_bytes,
    }
    assert ours == pytest.approx(want) and set(ours) == set(want)


@pytest.mark.parametrize("ours,theirs", [(Outcome, pb.Outcome),
                                         (Verdict, pb.Verdict),
                                         (Reason, pb.Reason)])
def test_enums_are_the_protos(ours, theirs):
    proto = {name: theirs.Value(name) for name in theirs.keys()
             if not name.endswith("_UNSPECIFIED")}
    assert {m.name: m.value for m in ours} == proto
