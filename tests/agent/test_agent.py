"""stagger-agent with real binaries: staggerd, agents on Unix sockets, and
workers in C++ (the client library, agent_worker) and Python (the
generated stubs). What the leases issue promises:

  * healthy deliveries are answered by the agents, not the coordinator,
    and their counts reach it;
  * a failure that opens an endpoint's breaker puts it in the coordinator's
    not-clear set, pushed to every agent: their next first attempts on it
    are the coordinator's to answer;
  * bad input gets the same answer from an agent as from staggerd;
  * a coordinator killed -9 leaves the agent answering (its fallback), and
    the agent reconnects when it is back;
  * an agent killed -9 leaves a worker's library deciding by fallback, and
    it comes back with the agent;
  * a waiting Admit relayed by an agent and held by staggerd is answered
    at once when either process is killed -9, never left to its wait.
"""

import json
import os
import subprocess
import tempfile
import threading
import time
import urllib.request

import grpc
import pytest
from google.protobuf import json_format

from agent_harness import (Agent, Staggerd, free_port, log, metric_sum,
                           poll_until)
from stagger.v1 import coordinator_pb2 as pb, coordinator_pb2_grpc as rpc

STAGGERD = os.environ["STAGGERD"]
AGENT = os.environ["STAGGER_AGENT"]
WORKER = os.environ["AGENT_WORKER"]
VECTORS = os.environ["STAGGER_VECTORS"]
TIMEOUT = 10.0  # per call: a loaded CI machine
# Leases are granted once staggerd has run one ttl and its longest probe
# timeout (sync.proto, "Probes"): both short, so tests wait little.
LEASE_TTL = ["--lease_ttl=1s"]


def quick_config(tmp_path, text=""):
    """A config file with a 1 s probe timeout (and `text` inside
    default_policy's breaker), for a staggerd that leases within seconds."""
    config = tmp_path / "config.textproto"
    config.write_text("default_policy { breaker { probe_timeout { seconds: 1 }"
                      " %s } }\n" % text)
    return ["--config=%s" % config]


@pytest.fixture
def procs():
    started = []

    def keep(p):
        started.append(p)
        return p
    yield keep
    for p in reversed(started):
        p.kill()


def sockdir():
    return tempfile.mkdtemp(prefix="stagger-agent-")


def stub(target):
    return rpc.RetryCoordinatorStub(grpc.insecure_channel(target))


def trip(s, ep):
    """Three failures of `ep` through stub `s`: the tests' configs open the
    breaker on the third."""
    for _ in range(3):
        s.Report(pb.ReportRequest(endpoint=ep, attempt=1,
                                  outcome=pb.RETRYABLE_FAILURE),
                 timeout=TIMEOUT)


def agent_status(port):
    """The JSON of the agent's status page on 127.0.0.1:port."""
    with urllib.request.urlopen("http://127.0.0.1:%d/api/agent" % port,
                                timeout=TIMEOUT) as r:
        return json.load(r)


def deliver(s, endpoint, n):
    """n deliveries to `endpoint` through stub `s`: Admit(1), then a SUCCESS
    report echoing the admission token. The verdicts seen."""
    seen = []
    for _ in range(n):
        d = s.Admit(pb.AdmitRequest(endpoint=endpoint, attempt=1),
                    timeout=TIMEOUT).decision
        seen.append(d.verdict)
        if d.verdict == pb.PROCEED:
            r = s.Report(pb.ReportRequest(endpoint=endpoint, attempt=1,
                                          outcome=pb.SUCCESS,
                                          admission=d.admission),
                         timeout=TIMEOUT).decision
            seen.append(r.verdict)
    return seen


def wait_for_lease(agent, s, endpoint):
    def leased():
        deliver(s, endpoint, 1)
        return metric_sum(agent.scrape(),
                          "stagger_client_lease_decisions_total") > 0
    poll_until("a lease on " + endpoint, leased)


def warm_up(agent, s, endpoints):
    """Delivers once to each endpoint through `agent` until one whole round
    is answered under leases (every call counted as a lease decision): from
    then on, the agent holds a lease on each of them."""
    def all_leased():
        before = metric_sum(agent.scrape(),
                            "stagger_client_lease_decisions_total")
        for ep in endpoints:
            deliver(s, ep, 1)
        after = metric_sum(agent.scrape(),
                           "stagger_client_lease_decisions_total")
        return after - before == 2 * len(endpoints)
    poll_until("leases on %d endpoints" % len(endpoints), all_leased)


def test_workers_in_two_languages_through_three_agents(procs, tmp_path):
    sd = procs(Staggerd(STAGGERD, extra=LEASE_TTL + quick_config(tmp_path)))
    d = sockdir()
    agents = [procs(Agent(AGENT, os.path.join(d, "a%d.sock" % i), sd.target))
              for i in range(3)]
    # Each agent first earns its leases on the 10 endpoints (how long that
    # takes depends on the machine; what follows does not).
    shared = ["https://shared.example/%d" % k for k in range(10)]
    for a in agents:
        warm_up(a, stub(a.target), shared)
    warm = {"coordinator": metric_sum(sd.scrape(), "stagger_decisions_total"),
            "local": sum(metric_sum(a.scrape(),
                                    "stagger_client_lease_decisions_total")
                         for a in agents)}
    # The Python workers: 10 endpoints each, on agents 1 and 2.
    results = {}

    def python_worker(i):
        s = stub(agents[i].target)
        seen = []
        for k in range(300):
            seen += deliver(s, "https://shared.example/%d" % (k % 10), 1)
        results[i] = seen
    threads = [threading.Thread(target=python_worker, args=(i,))
               for i in (1, 2)]
    for t in threads:
        t.start()
    cpp = subprocess.run(
        [WORKER, "--target=" + agents[0].target, "--deliveries=300",
         "--endpoints=10", "--endpoint_prefix=https://shared.example/"],
        capture_output=True, text=True, timeout=300)
    for t in threads:
        t.join()
    log("C++ worker:", cpp.stdout.strip(), cpp.stderr.strip())
    assert cpp.returncode == 0
    assert json.loads(cpp.stdout)["succeeded"] == 300
    for i in (1, 2):
        assert results[i].count(pb.PROCEED) == 300, results[i][:20]
        assert results[i].count(pb.DONE) == 300
    # 900 deliveries, 1800 calls: the coordinator answered few of them.
    calls = 1800
    coordinator = (metric_sum(sd.scrape(), "stagger_decisions_total") -
                   warm["coordinator"])
    local = sum(metric_sum(a.scrape(), "stagger_client_lease_decisions_total")
                for a in agents) - warm["local"]
    log("calls %d: coordinator %d, under leases %d" % (calls, coordinator,
                                                       local))
    assert coordinator + local == calls
    assert local >= 0.5 * calls
    # What was answered locally reached the coordinator as counts.
    assert metric_sum(sd.scrape(), "stagger_sync_messages_total") > 0
    poll_until("the last counts", lambda: all(
        metric_sum(a.scrape(), "stagger_client_sync_flushes_total") > 0
        for a in agents))


def test_counts_of_local_answers_fund_the_coordinators_budget(procs, tmp_path):
    sd = procs(Staggerd(STAGGERD, extra=LEASE_TTL + quick_config(tmp_path)))
    agent = procs(Agent(AGENT, os.path.join(sockdir(), "a.sock"), sd.target))
    s = stub(agent.target)
    ep = "https://counted.example"
    wait_for_lease(agent, s, ep)
    deliver(s, ep, 1000)
    # 0.2 retries per first attempt over the budget's 10 s window: past the
    # floor of 100 once the agent's counts are applied.
    direct = stub(sd.target)
    poll_until("counts applied", lambda: direct.GetEndpoint(
        pb.GetEndpointRequest(endpoint=ep),
        timeout=TIMEOUT).state.budget_remaining > 150)


def test_a_failure_that_opens_the_breaker_ends_local_answers_on_it(
        procs, tmp_path):
    sd = procs(Staggerd(STAGGERD, extra=LEASE_TTL + quick_config(
        tmp_path, "consecutive_failures: 3 open_base { seconds: 600 } "
        "open_max { seconds: 600 }")))
    d = sockdir()
    # A loaded CI machine can take longer than the agent's default 50 ms to
    # answer; B's fallback (breaker closed) would then say PROCEED.
    a, b = (procs(Agent(AGENT, os.path.join(d, n), sd.target,
                        extra=["--call_deadline=2s"]))
            for n in ("a.sock", "b.sock"))
    sa, sb = stub(a.target), stub(b.target)
    ep = "https://failing.example"
    wait_for_lease(a, sa, ep)
    wait_for_lease(b, sb, ep)
    trip(sa, ep)
    # B is told (how fast: bench/run's push_p99_ms); its first attempts
    # are the coordinator's again.
    last = []

    def revoked():
        dec = sb.Admit(pb.AdmitRequest(endpoint=ep, attempt=1),
                       timeout=TIMEOUT).decision
        last[:] = [dec]
        return dec.reason == pb.CIRCUIT_OPEN
    try:
        poll_until("B told the endpoint is not clear", revoked)
    except AssertionError as e:
        raise AssertionError("%s; B's last answer: %s" % (e, last)) from e
    for _ in range(20):
        dec = sb.Admit(pb.AdmitRequest(endpoint=ep, attempt=1),
                       timeout=TIMEOUT).decision
        assert (dec.verdict, dec.reason) == (pb.DEFER, pb.CIRCUIT_OPEN)
    poll_until("the endpoint in staggerd's not-clear set", lambda: (
        metric_sum(sd.scrape(), "stagger_not_clear_entries") >= 1))


def load_validation():
    with open(VECTORS, encoding="utf-8") as f:
        return json.load(f)["validation"]


def expand(v):
    if isinstance(v, dict):
        if "repeat" in v:
            return (v.get("prefix", "") + v["repeat"] * v["times"] +
                    v.get("suffix", ""))
        return {k: expand(x) for k, x in v.items()}
    return v


def answer(s, call, request):
    try:
        fn = s.Admit if call == "Admit" else s.Report
        msg = pb.AdmitRequest() if call == "Admit" else pb.ReportRequest()
        json_format.ParseDict(expand(request), msg)
        fn(msg, timeout=TIMEOUT)
        return ("OK", "")
    except grpc.RpcError as e:
        return (e.code().name, e.details())


def raw_answer(target, method, payload):
    channel = grpc.insecure_channel(target)
    call = channel.unary_unary("/stagger.v1.RetryCoordinator/" + method,
                               request_serializer=None,
                               response_deserializer=None)
    try:
        call(payload, timeout=TIMEOUT)
        return ("OK", "")
    except grpc.RpcError as e:
        return (e.code().name, e.details())


def test_bad_input_gets_the_same_answer_from_an_agent_as_from_staggerd(procs):
    sd = procs(Staggerd(STAGGERD))
    agent = procs(Agent(AGENT, os.path.join(sockdir(), "a.sock"), sd.target))
    direct, via = stub(sd.target), stub(agent.target)
    vectors = load_validation()
    assert len(vectors) >= 20
    for v in vectors:
        want = answer(direct, v["call"], v["request"])
        assert want == (("OK", "") if v["error"] is None else
                        ("INVALID_ARGUMENT", v["error"])), v["name"]
        assert answer(via, v["call"], v["request"]) == want, v["name"]
    for method in ("Admit", "Report", "AdmitBatch", "ReportBatch"):
        want = raw_answer(sd.target, method, b"\xff\xff\xff")
        assert want[0] == "INVALID_ARGUMENT"
        assert raw_answer(agent.target, method, b"\xff\xff\xff") == want
    # A batch over the limit, and a bad item: the same words.
    big = pb.AdmitBatchRequest(items=[pb.AdmitRequest(endpoint="x", attempt=1)
                                      for _ in range(1001)])
    bad = pb.AdmitBatchRequest(items=[pb.AdmitRequest(endpoint="x", attempt=1),
                                      pb.AdmitRequest(endpoint="", attempt=1)])
    for req in (big, bad):
        got = []
        for s in (direct, via):
            try:
                s.AdmitBatch(req, timeout=TIMEOUT)
                got.append("OK")
            except grpc.RpcError as e:
                got.append((e.code().name, e.details()))
        assert got[0] == got[1] and got[0] != "OK", got


def test_a_coordinator_killed_leaves_the_agent_answering(procs, tmp_path):
    port = free_port()
    quick = LEASE_TTL + quick_config(tmp_path)
    sd = procs(Staggerd(STAGGERD, port=port, extra=quick))
    agent = procs(Agent(AGENT, os.path.join(sockdir(), "a.sock"), sd.target,
                        extra=["--recheck_interval=200ms"]))
    s = stub(agent.target)
    ep = "https://through-a-restart.example"
    wait_for_lease(agent, s, ep)
    sd.kill()
    # Every call is answered: under the lease while it lasts (up to a ttl:
    # endpoints never seen included), then by the agent's fallback; never
    # an error.
    seen = deliver(s, ep, 100) + deliver(s, "https://new.example", 25)
    time.sleep(1.5)  # the 1 s lease has ended
    seen += deliver(s, ep, 100) + deliver(s, "https://new.example", 25)
    assert seen.count(pb.PROCEED) == 250 and seen.count(pb.DONE) == 250
    assert metric_sum(agent.scrape(),
                      "stagger_client_fallback_decisions_total") > 0
    sd2 = procs(Staggerd(STAGGERD, port=port, extra=quick))
    poll_until("the lease stream back", lambda: agent.scrape().get(
        "stagger_client_sync_streams_up") == 1.0)
    # (The old staggerd's lease ends when the agent takes the new one's set;
    # wait for the new one's renewal, then for a call answered under it.)
    poll_until("a lease from the new staggerd", lambda: (
        deliver(s, ep, 1) and
        metric_sum(sd2.scrape(), "stagger_lease_grants_total") >= 1))
    before = metric_sum(agent.scrape(), "stagger_client_lease_decisions_total")
    poll_until("a call answered under it", lambda: (
        deliver(s, ep, 1) and metric_sum(
            agent.scrape(), "stagger_client_lease_decisions_total") > before))


def test_the_fallback_keeps_to_the_last_not_clear_set(procs, tmp_path):
    """staggerd dies after it pushed an open breaker and a pause: the
    agent's fallback does not answer those keys as healthy. The paused one
    is deferred until its pause ends, the tripped one gets the local
    breaker opened; a healthy key proceeds."""
    sd = procs(Staggerd(STAGGERD, extra=LEASE_TTL + quick_config(
        tmp_path, "consecutive_failures: 3 open_base { seconds: 60 } "
        "open_max { seconds: 60 }")))
    status_port = free_port()
    agent = procs(Agent(AGENT, os.path.join(sockdir(), "a.sock"), sd.target,
                        extra=["--call_deadline=2s",
                               "--status_address=127.0.0.1:%d" % status_port]))
    s = stub(agent.target)
    tripped, paused, healthy = ("https://tripped.example",
                                "https://paused.example",
                                "https://healthy.example")
    wait_for_lease(agent, s, healthy)
    trip(s, tripped)
    subprocess.run([os.environ["STAGGERCTL"], "--address=" + sd.target,
                    "pause", paused, "--for", "10m", "--reason", "maintenance"],
                   check=True, capture_output=True, timeout=30)
    poll_until("both keys in the agent's copy of the set", lambda: {
        e["target"] for e in agent_status(status_port)["not_clear"]} >= {
            tripped, paused})
    sd.kill()
    time.sleep(1.5)  # the 1 s lease has ended: the fallback decides
    d = s.Admit(pb.AdmitRequest(endpoint=paused, attempt=1),
                timeout=TIMEOUT).decision
    assert (d.verdict, d.reason) == (pb.DEFER, pb.PAUSED), d
    assert d.defer_for.seconds > 500, d  # until the pause's end (10 min)
    d = s.Admit(pb.AdmitRequest(endpoint=tripped, attempt=1),
                timeout=TIMEOUT).decision
    assert (d.verdict, d.reason) == (pb.DEFER, pb.CIRCUIT_OPEN), d
    d = s.Admit(pb.AdmitRequest(endpoint=healthy, attempt=1),
                timeout=TIMEOUT).decision
    assert d.verdict == pb.PROCEED, d


def test_an_agent_killed_leaves_the_workers_library_deciding(procs):
    from stagger import CoordinatorClient, Source
    sd = procs(Staggerd(STAGGERD))
    path = os.path.join(sockdir(), "a.sock")
    agent = procs(Agent(AGENT, path, sd.target))
    c = CoordinatorClient("unix:" + path, call_deadline=TIMEOUT,
                          recheck_interval=0.2)
    try:
        assert c.admit("https://x.example").source is Source.COORDINATOR
        agent.kill()
        d = c.admit("https://x.example")
        assert d.source is Source.LOCAL and d.verdict.name == "PROCEED"
        procs(Agent(AGENT, path, sd.target))
        poll_until("the agent back", lambda: c.admit(
            "https://x.example").source is Source.COORDINATOR)
    finally:
        c.close()


def test_calls_waiting_through_an_agent_are_answered_when_a_process_dies(
        procs, tmp_path):
    from stagger import CoordinatorClient, Source
    config = tmp_path / "config.textproto"
    config.write_text("default_policy { breaker { consecutive_failures: 3 "
                      "open_base { seconds: 600 } open_max { seconds: 600 } } }\n")
    sd = procs(Staggerd(STAGGERD, extra=["--config=%s" % config]))
    path = os.path.join(sockdir(), "a.sock")
    agent = procs(Agent(AGENT, path, sd.target))
    ep = "https://down.example"
    trip(stub(agent.target), ep)
    c = CoordinatorClient("unix:" + path, call_deadline=TIMEOUT)

    def waiting_admit_while(kill):
        """A 60 s waiting Admit, held by staggerd (its breaker is open for
        10 minutes); kill() runs while it is held. Its answer, and how long
        the call took."""
        got = {}

        def call():
            started = time.monotonic()
            got["decision"] = c.admit(ep, 1, wait=60.0)
            got["took"] = time.monotonic() - started
        t = threading.Thread(target=call)
        t.start()
        poll_until("the call held by staggerd", lambda: sd.scrape().get(
            "stagger_waiting_calls") == 1.0)
        kill()
        t.join(90)
        assert not t.is_alive() and "decision" in got
        log("answered after %.3fs: %s" % (got["took"], got["decision"]))
        # Answered when the process died, not when the 60 s wait ran out.
        assert got["took"] < 50
        return got["decision"]
    try:
        # The agent dies: the worker's library answers (its fallback), and
        # staggerd lets go of the abandoned call.
        d = waiting_admit_while(agent.kill)
        assert d.source is Source.LOCAL
        poll_until("the abandoned call gone from staggerd", lambda: (
            sd.scrape().get("stagger_waiting_calls") == 0.0))
        # A new agent; now staggerd dies: the agent answers the relayed
        # call from its own fallback, no error reaches the worker.
        procs(Agent(AGENT, path, sd.target))
        poll_until("the agent back", lambda: c.admit(
            ep, 1).source is Source.COORDINATOR)
        d = waiting_admit_while(sd.kill)
        assert d.verdict.name in ("PROCEED", "DEFER"), d
    finally:
        c.close()


def test_waiting_calls_are_held_by_the_agent_and_released_by_staggerd(
        procs, tmp_path):
    """Twenty waiting Admits to an open breaker stay in the agent (its
    status page counts them as held), each one an entry in staggerd's line;
    the half-open probe goes to one, its success releases the rest."""
    config = tmp_path / "config.textproto"
    config.write_text(
        "default_policy { breaker { consecutive_failures: 3 "
        "open_base { seconds: 2 } open_max { seconds: 2 } "
        "half_open_probes: 1 close_after_successes: 1 } }\n")
    sd = procs(Staggerd(STAGGERD, extra=["--config=%s" % config]))
    path = os.path.join(sockdir(), "held.sock")
    status_port = free_port()
    agent = procs(Agent(AGENT, path, sd.target, extra=[
        "--status_address=127.0.0.1:%d" % status_port]))
    ep = "https://held.example"
    s = stub(agent.target)
    trip(s, ep)

    def agent_held():
        return agent_status(status_port)["held_calls"]

    answers = []
    lock = threading.Lock()

    def call():
        req = pb.AdmitRequest(endpoint=ep, attempt=2)
        req.wait.seconds = 30
        resp = s.Admit(req, timeout=40)
        with lock:
            answers.append(resp.decision)
    threads = [threading.Thread(target=call) for _ in range(20)]
    for t in threads:
        t.start()
    poll_until("20 calls held by the agent", lambda: agent_held() == 20)
    poll_until("an entry for each in staggerd's line", lambda: sd.scrape().get(
        "stagger_waiting_calls") == 20.0)
    # The breaker half-opens (2 s): one call gets the probe.
    poll_until("the probe", lambda: len(answers) == 1, timeout=30)
    probe = answers[0]
    assert probe.reason == pb.HALF_OPEN_PROBE, probe
    s.Report(pb.ReportRequest(endpoint=ep, attempt=2, outcome=pb.SUCCESS,
                              admission=probe.admission), timeout=TIMEOUT)
    for t in threads:
        t.join(40)
    assert len(answers) == 20
    released = [d for d in answers[1:]]
    assert all(d.verdict == pb.PROCEED for d in released), released
    assert all(d.reason == pb.RELEASED for d in released), released
    poll_until("nothing held", lambda: agent_held() == 0)
    poll_until("nothing in staggerd's line", lambda: sd.scrape().get(
        "stagger_waiting_calls") == 0.0)


def test_the_agents_waiting_bound_answers_beyond_it_at_once(procs, tmp_path):
    """--max_waiting_calls=2: two waiting Admits are held, a third is
    answered at once as an Admit without a wait (and counted); a bound out
    of range refuses to start, naming the flag."""
    bad = subprocess.run([AGENT, "--max_waiting_calls=-1"],
                         capture_output=True, text=True, timeout=30)
    assert bad.returncode == 2, bad
    assert "--max_waiting_calls: must be in [0, 1000000], got -1" in bad.stderr

    config = tmp_path / "config.textproto"
    config.write_text("default_policy { breaker { consecutive_failures: 3 "
                      "open_base { seconds: 600 } open_max { seconds: 600 } } }\n")
    sd = procs(Staggerd(STAGGERD, extra=["--config=%s" % config]))
    path = os.path.join(sockdir(), "bound.sock")
    status_port = free_port()
    agent = procs(Agent(AGENT, path, sd.target, extra=[
        "--max_waiting_calls=2", "--status_address=127.0.0.1:%d" % status_port]))
    ep = "https://bound.example"
    s = stub(agent.target)
    trip(s, ep)

    def status():
        return agent_status(status_port)

    req = pb.AdmitRequest(endpoint=ep, attempt=2)
    req.wait.seconds = 30
    held = [s.Admit.future(req, timeout=40) for _ in range(2)]
    poll_until("two calls held", lambda: status()["waiting_calls"] == 2)
    started = time.monotonic()
    third = s.Admit(req, timeout=TIMEOUT)
    assert time.monotonic() - started < 5
    assert third.decision.verdict == pb.DEFER
    assert third.decision.reason == pb.CIRCUIT_OPEN
    st = status()
    assert st["waiting_overflows"] == 1 and st["waiting_calls"] == 2, st
    for f in held:
        f.cancel()
    poll_until("the cancelled calls gone", lambda: status()["waiting_calls"] == 0)
