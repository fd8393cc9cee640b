"""Held calls over a real dead link: staggerd and stagger-agent in network
namespaces of their own, joined by a veth pair, and the link set down while
calls are held. Needs root (`ip netns`); skipped with a message otherwise.

  root namespace (this test, the workers)
    |  admin veth: scrapes staggerd, asks it directly
  namespace "s": staggerd on 0.0.0.0:50051
    |  agent veth: the lease stream; set down mid-test
  namespace "a": stagger-agent, on a Unix socket the workers reach

What it proves (docs/AGENT.md, "Faults"):
  * every call held through the agent ends by its worker's deadline, with
    the fallback's decision (`stagger-source: local`), not an error;
  * staggerd drops the dead agent's entries within its keepalive
    (--keepalive_time + --keepalive_timeout, 5 s + 5 s), so they take no
    half-open probe: when the breaker half-opens, the probe is there
    (HALF_OPEN_PROBE), not gone until probe_timeout (60 s here);
  * after the link is back, the agent reconnects and asks staggerd again.

And when staggerd itself is killed (-9) while calls are held, then started
again from its state file:
  * every held call is answered by its worker's deadline, not an error;
  * the restarted staggerd still holds the breaker open (the state file),
    and the reconnected agent sends the endpoint's first attempts to it:
    no local admission beside the probe that will come.
"""

import os
import subprocess
import threading
import time
import urllib.request

import grpc
import pytest

from agent_harness import Proc, log, metric_sum, poll_until
from stagger.v1 import coordinator_pb2 as pb, coordinator_pb2_grpc as rpc

STAGGERD = os.environ["STAGGERD"]
AGENT = os.environ["STAGGER_AGENT"]

if os.geteuid() != 0:
    pytest.skip("needs root: network namespaces (ip netns) and veth pairs",
                allow_module_level=True)

PORT = 50051
METRICS_PORT = 9464
CALLS = 8
# Each call's wait is longer than its worker's deadline, and the agent
# holds it at staggerd until that deadline - 150 ms: past the half-open
# (OPEN_S, +-10% jitter). An entry staggerd kept would take the probe.
WAIT_S = 60
DEADLINE_S = 40.0
OPEN_S = 25
PROBE_TIMEOUT_S = 60
# staggerd's defaults (--keepalive_time, --keepalive_timeout), and slack
# for a loaded machine.
SERVER_KEEPALIVE_S = 5 + 5
SLACK_S = 5
EP = "https://netns-down.example/hook"


def ip(*args):
    subprocess.run(["ip"] + list(args), check=True, capture_output=True)


class Net:
    """Two namespaces and two veth pairs, named after this process, removed
    on close() (and before use, if a killed run left them)."""

    def __init__(self):
        n = os.getpid() % 100000
        sub = os.getpid() % 250 + 1
        self.ns_s, self.ns_a = "stgr%d-s" % n, "stgr%d-a" % n
        self.admin_root, self.admin_s = "sg%dr0" % n, "sg%dr1" % n
        self.link_s, self.link_a = "sg%ds0" % n, "sg%da0" % n
        self.root_ip, self.s_admin_ip = "10.202.%d.1" % sub, "10.202.%d.2" % sub
        self.s_ip, self.a_ip = "10.201.%d.1" % sub, "10.201.%d.2" % sub
        self.close()
        ip("netns", "add", self.ns_s)
        ip("netns", "add", self.ns_a)
        ip("link", "add", self.admin_root, "type", "veth", "peer", "name",
           self.admin_s, "netns", self.ns_s)
        ip("link", "add", self.link_s, "netns", self.ns_s, "type", "veth",
           "peer", "name", self.link_a, "netns", self.ns_a)
        ip("addr", "add", self.root_ip + "/30", "dev", self.admin_root)
        ip("link", "set", self.admin_root, "up")
        ip("-n", self.ns_s, "addr", "add", self.s_admin_ip + "/30", "dev",
           self.admin_s)
        ip("-n", self.ns_s, "addr", "add", self.s_ip + "/30", "dev",
           self.link_s)
        ip("-n", self.ns_a, "addr", "add", self.a_ip + "/30", "dev",
           self.link_a)
        for ns, dev in ((self.ns_s, self.admin_s), (self.ns_s, self.link_s),
                        (self.ns_a, self.link_a), (self.ns_s, "lo"),
                        (self.ns_a, "lo")):
            ip("-n", ns, "link", "set", dev, "up")

    def link(self, up):
        ip("-n", self.ns_a, "link", "set", self.link_a, "up" if up else "down")

    def close(self):
        subprocess.run(["ip", "link", "del", self.admin_root],
                       capture_output=True)
        for ns in (self.ns_s, self.ns_a):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)


@pytest.fixture
def net():
    n = Net()
    yield n
    n.close()


@pytest.fixture
def procs():
    started = []
    yield started.append
    for p in reversed(started):
        p.kill()


def staggerd_in(net, config, extra):
    p = Proc(["ip", "netns", "exec", net.ns_s, STAGGERD,
              "--address=0.0.0.0:%d" % PORT,
              "--metrics_address=0.0.0.0:%d" % METRICS_PORT,
              "--lease_ttl=1s", "--config=%s" % config] + list(extra),
             r"listening on \S+:(\d+) \(metrics on port (\d+)\)", "staggerd")
    p.target = "%s:%d" % (net.s_admin_ip, PORT)
    p.scrape = lambda: metrics_at(net.s_admin_ip, METRICS_PORT)
    return p


def metrics_at(host, port):
    """{"name{labels}": value} of the /metrics page at host:port."""
    text = urllib.request.urlopen(
        "http://%s:%d/metrics" % (host, port), timeout=10).read().decode()
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            key, value = line.rsplit(" ", 1)
            out[key] = float(value)
    return out


def agent_in(net, socket_path):
    p = Proc(["ip", "netns", "exec", net.ns_a, AGENT,
              "--listen=unix:" + socket_path,
              "--coordinator=%s:%d" % (net.s_ip, PORT),
              "--metrics_address=127.0.0.1:0", "--flush_interval=100ms"],
             r"listening on (\S+) .*metrics on port (\d+)", "agent")
    p.target = "unix:" + socket_path
    return p


def source_of(call):
    return dict(call.initial_metadata()).get("stagger-source")


def test_held_calls_end_on_time_and_no_probe_is_lost_when_the_link_dies(
        net, procs, tmp_path):
    link_dies_while_calls_are_held(net, procs, tmp_path, staggerd_flags=())


def test_planted_a_staggerd_that_never_pings_keeps_the_dead_entries(
        net, procs, tmp_path):
    """The planted regression: staggerd without its keepalive (as before
    issue 27) keeps a dead agent's entries until their waits end; the
    check above must catch it."""
    with pytest.raises(AssertionError, match="entries dropped"):
        link_dies_while_calls_are_held(
            net, procs, tmp_path,
            staggerd_flags=("--keepalive_time=24h", "--keepalive_timeout=1h"))


def link_dies_while_calls_are_held(net, procs, tmp_path, staggerd_flags):
    """CALLS waiting Admits through the agent, held by staggerd (its breaker
    open for OPEN_S); the agent's link goes down; the checks in the module's
    docstring; the link comes back."""
    config = tmp_path / "config.textproto"
    config.write_text(
        "default_policy { breaker { consecutive_failures: 3 "
        "open_base { seconds: %d } open_max { seconds: %d } "
        "half_open_probes: 1 close_after_successes: 1 "
        "probe_timeout { seconds: %d } } }\n"
        % (OPEN_S, OPEN_S, PROBE_TIMEOUT_S))
    sd = staggerd_in(net, config, staggerd_flags)
    procs(sd)
    agent = agent_in(net, str(tmp_path / "agent.sock"))
    procs(agent)
    direct = rpc.RetryCoordinatorStub(grpc.insecure_channel(sd.target))
    via_agent = rpc.RetryCoordinatorStub(grpc.insecure_channel(agent.target))

    def asks_staggerd():
        _, call = via_agent.Admit.with_call(
            pb.AdmitRequest(endpoint="https://netns-up.example", attempt=1),
            timeout=10)
        return source_of(call) == "coordinator"
    poll_until("the agent talking to staggerd", asks_staggerd)
    for _ in range(3):  # the breaker opens for OPEN_S
        direct.Report(pb.ReportRequest(endpoint=EP, attempt=1,
                                       outcome=pb.RETRYABLE_FAILURE),
                      timeout=10)
    tripped = time.monotonic()

    answers = []
    lock = threading.Lock()

    def call():
        req = pb.AdmitRequest(endpoint=EP, attempt=2)
        req.wait.seconds = WAIT_S
        started = time.monotonic()
        try:
            resp, c = via_agent.Admit.with_call(req, timeout=DEADLINE_S)
            got = (resp.decision, source_of(c), None)
        except grpc.RpcError as e:
            got = (None, None, e.code())
        with lock:
            answers.append((started, time.monotonic()) + got)
    threads = [threading.Thread(target=call) for _ in range(CALLS)]
    for t in threads:
        t.start()
    poll_until("%d entries in staggerd's line" % CALLS, lambda: sd.scrape().get(
        "stagger_waiting_calls") == float(CALLS))

    net.link(up=False)
    cut = time.monotonic()
    log("link down %.1fs after the trip" % (cut - tripped))
    # staggerd: the silent peer's connection is closed; its entries go.
    poll_until("the dead agent's entries dropped", lambda: sd.scrape().get(
        "stagger_waiting_calls") == 0.0, timeout=SERVER_KEEPALIVE_S + SLACK_S)
    dropped_after = time.monotonic() - cut
    # The agent: every held call is answered by its worker's deadline.
    for t in threads:
        t.join(DEADLINE_S + SLACK_S)
    assert len(answers) == CALLS
    for started, ended, decision, source, error in answers:
        assert error is None, "a held call failed: %s" % error
        assert ended - started < DEADLINE_S, (ended - started)
        assert source == "local", source
        assert decision.verdict in (pb.PROCEED, pb.DEFER), decision
    latest = max(a[1] - a[0] for a in answers)
    after_cut = max(a[1] for a in answers) - cut
    log("staggerd dropped the entries %.2fs after the cut; the agent answered"
        " every call by %.2fs after the cut, the latest %.2fs into its %.0fs"
        " deadline" % (dropped_after, after_cut, latest, DEADLINE_S))

    # The breaker half-opens: its probe is free, not held by a dead entry
    # until probe_timeout.

    def admit_direct():
        return direct.Admit(pb.AdmitRequest(endpoint=EP, attempt=2),
                            timeout=10).decision
    first = {}

    def half_open():
        d = admit_direct()
        if d.reason == pb.CIRCUIT_OPEN:
            return False
        first["d"] = d
        return True
    poll_until("the breaker half-open", half_open, timeout=OPEN_S + SLACK_S,
               interval=0.2)
    probe = first["d"]
    log("%.2fs after the trip: %s" % (time.monotonic() - tripped,
                                       pb.Reason.Name(probe.reason)))
    assert probe.reason == pb.HALF_OPEN_PROBE, probe
    direct.Report(pb.ReportRequest(endpoint=EP, attempt=2, outcome=pb.SUCCESS,
                                   admission=probe.admission), timeout=10)

    # The link comes back: the agent reconnects and asks staggerd again.
    net.link(up=True)
    healed = time.monotonic()
    poll_until("the agent back on staggerd", asks_staggerd, timeout=30,
               interval=0.2)
    log("the agent asked staggerd again %.2fs after the heal"
        % (time.monotonic() - healed))
    assert metric_sum(sd.scrape(), "stagger_waiting_calls") == 0


CRASH_DEADLINE_S = 20.0


def test_staggerd_killed_while_calls_are_held_restarts_from_its_state(
        net, procs, tmp_path):
    config = tmp_path / "config.textproto"
    config.write_text(
        "default_policy { breaker { consecutive_failures: 3 "
        "open_base { seconds: %d } open_max { seconds: %d } "
        "half_open_probes: 1 close_after_successes: 1 "
        "probe_timeout { seconds: %d } } }\n"
        % (OPEN_S * 3, OPEN_S * 3, PROBE_TIMEOUT_S))
    state = ["--state_file=%s" % (tmp_path / "state"),
             "--state_save_interval=1s"]
    sd = staggerd_in(net, config, state)
    procs(sd)
    agent = agent_in(net, str(tmp_path / "agent.sock"))
    procs(agent)
    direct = rpc.RetryCoordinatorStub(grpc.insecure_channel(sd.target))
    via_agent = rpc.RetryCoordinatorStub(grpc.insecure_channel(agent.target))

    def first_attempt_source(endpoint):
        _, call = via_agent.Admit.with_call(
            pb.AdmitRequest(endpoint=endpoint, attempt=1), timeout=10)
        return source_of(call)
    poll_until("the agent talking to staggerd",
               lambda: first_attempt_source("https://netns-up.example")
               == "coordinator")
    for _ in range(3):  # the breaker opens for 3 * OPEN_S
        direct.Report(pb.ReportRequest(endpoint=EP, attempt=1,
                                       outcome=pb.RETRYABLE_FAILURE),
                      timeout=10)
    saves = metric_sum(sd.scrape(), "stagger_state_saves_total")
    poll_until("the trip saved", lambda: metric_sum(
        sd.scrape(), "stagger_state_saves_total") >= saves + 2)

    answers = []
    lock = threading.Lock()

    def call():
        req = pb.AdmitRequest(endpoint=EP, attempt=2)
        req.wait.seconds = WAIT_S
        started = time.monotonic()
        try:
            resp, c = via_agent.Admit.with_call(req, timeout=CRASH_DEADLINE_S)
            got = (resp.decision, source_of(c), None)
        except grpc.RpcError as e:
            got = (None, None, e.code())
        with lock:
            answers.append((started, time.monotonic()) + got)
    threads = [threading.Thread(target=call) for _ in range(CALLS)]
    for t in threads:
        t.start()
    poll_until("%d entries in staggerd's line" % CALLS, lambda: sd.scrape().get(
        "stagger_waiting_calls") == float(CALLS))

    sd.kill()  # SIGKILL: no drain, no last save
    killed = time.monotonic()
    sd = staggerd_in(net, config, state)
    procs(sd)
    log("staggerd back %.2fs after the kill" % (time.monotonic() - killed))
    for t in threads:
        t.join(CRASH_DEADLINE_S + SLACK_S)
    assert len(answers) == CALLS
    for started, ended, decision, source, error in answers:
        assert error is None, "a held call failed: %s" % error
        assert ended - started < CRASH_DEADLINE_S, (ended - started)
        assert decision.verdict in (pb.PROCEED, pb.DEFER), decision
    log("every held call answered; sources %s" % sorted(
        set(a[3] for a in answers)))

    after = direct.Admit(pb.AdmitRequest(endpoint=EP, attempt=2),
                         timeout=10).decision
    assert after.reason in (pb.CIRCUIT_OPEN, pb.HALF_OPEN_BUSY), (
        "the state file's open breaker: %s" % pb.Reason.Name(after.reason))
    poll_until("the agent back on staggerd",
               lambda: first_attempt_source("https://netns-up.example")
               == "coordinator", timeout=30, interval=0.2)
    assert first_attempt_source(EP) == "coordinator", (
        "a first attempt to an open endpoint admitted locally")
