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

And with two agents, one cut off for PARTITION_S while calls are held
through it: its held calls end by their deadline, it answers from the
fallback once its lease has ended, the other agent stays leased, the lease
comes back after the heal, and staggerd counted every local answer of
both exactly once (stagger_counted_total = the agents' summed
stagger_client_lease_decisions_total).
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
    """Namespaces for staggerd and `agents` agents, a veth pair from each
    agent's to staggerd's (its own /30), and an admin veth from the root
    namespace to staggerd's. Named after this process; removed on close()
    (and before use, if a killed run left them). Agent i's fields are
    ns_as[i], a_ips[i] and s_ips[i] (staggerd's address on that link);
    ns_a, a_ip and s_ip are agent 0's."""

    def __init__(self, agents=1):
        n = os.getpid() % 100000
        sub = os.getpid() % 250 + 1
        self.ns_s = "stgr%d-s" % n
        self.ns_as = ["stgr%d-a%d" % (n, i) for i in range(agents)]
        self.admin_root, self.admin_s = "sg%dr0" % n, "sg%dr1" % n
        self.links_s = ["sg%ds%d" % (n, i) for i in range(agents)]
        self.links_a = ["sg%da%d" % (n, i) for i in range(agents)]
        self.root_ip, self.s_admin_ip = "10.202.%d.1" % sub, "10.202.%d.2" % sub
        # Agent i's /30: 10.201.<sub>.<4i>.
        self.s_ips = ["10.201.%d.%d" % (sub, 4 * i + 1) for i in range(agents)]
        self.a_ips = ["10.201.%d.%d" % (sub, 4 * i + 2) for i in range(agents)]
        self.ns_a, self.s_ip, self.a_ip = self.ns_as[0], self.s_ips[0], self.a_ips[0]
        self.close()
        ip("netns", "add", self.ns_s)
        for ns in self.ns_as:
            ip("netns", "add", ns)
        ip("link", "add", self.admin_root, "type", "veth", "peer", "name",
           self.admin_s, "netns", self.ns_s)
        ip("addr", "add", self.root_ip + "/30", "dev", self.admin_root)
        ip("link", "set", self.admin_root, "up")
        ip("-n", self.ns_s, "addr", "add", self.s_admin_ip + "/30", "dev",
           self.admin_s)
        ups = [(self.ns_s, self.admin_s), (self.ns_s, "lo")]
        for i, ns in enumerate(self.ns_as):
            ip("link", "add", self.links_s[i], "netns", self.ns_s, "type",
               "veth", "peer", "name", self.links_a[i], "netns", ns)
            ip("-n", self.ns_s, "addr", "add", self.s_ips[i] + "/30", "dev",
               self.links_s[i])
            ip("-n", ns, "addr", "add", self.a_ips[i] + "/30", "dev",
               self.links_a[i])
            ups += [(self.ns_s, self.links_s[i]), (ns, self.links_a[i]),
                    (ns, "lo")]
        for ns, dev in ups:
            ip("-n", ns, "link", "set", dev, "up")

    def link(self, up, agent=0):
        ip("-n", self.ns_as[agent], "link", "set", self.links_a[agent],
           "up" if up else "down")

    def close(self):
        subprocess.run(["ip", "link", "del", self.admin_root],
                       capture_output=True)
        for ns in [self.ns_s] + self.ns_as:
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


def parse_metrics(text):
    """{"name{labels}": value} of a /metrics page's text."""
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            key, value = line.rsplit(" ", 1)
            out[key] = float(value)
    return out


def metrics_at(host, port):
    """parse_metrics of the /metrics page at host:port."""
    return parse_metrics(urllib.request.urlopen(
        "http://%s:%d/metrics" % (host, port), timeout=10).read().decode())


def agent_in(net, socket_path, agent=0, flush="100ms"):
    ns = net.ns_as[agent]
    p = Proc(["ip", "netns", "exec", ns, AGENT,
              "--listen=unix:" + socket_path,
              "--coordinator=%s:%d" % (net.s_ips[agent], PORT),
              "--agent_id=netns-agent-%d" % agent,
              "--metrics_address=127.0.0.1:0", "--flush_interval=" + flush],
             r"listening on (\S+) .*metrics on port (\d+)",
             "agent%d" % agent)
    p.target = "unix:" + socket_path
    port = int(p.ready_match.group(2))
    # Its metrics listen inside its namespace: read them from there.
    p.scrape = lambda: scrape_in(ns, port)
    return p


def scrape_in(ns, port):
    """metrics_at(127.0.0.1, port) as seen inside namespace `ns`."""
    out = subprocess.run(
        ["ip", "netns", "exec", ns, "/usr/bin/python3", "-c",
         "import urllib.request, sys; sys.stdout.write(urllib.request."
         "urlopen('http://127.0.0.1:%d/metrics', timeout=10).read()"
         ".decode())" % port], check=True, capture_output=True,
        text=True).stdout
    return parse_metrics(out)


def hold_calls(sd, stub, deadline_s):
    """CALLS waiting Admits (attempt 2 to EP, wait WAIT_S) through `stub`,
    each on a thread with its worker's deadline, once staggerd holds them
    all. Returns (threads, answers): each answer is (started, ended,
    decision, stagger-source, error code), appended when the call ends."""
    answers = []
    lock = threading.Lock()

    def call():
        req = pb.AdmitRequest(endpoint=EP, attempt=2)
        req.wait.seconds = WAIT_S
        started = time.monotonic()
        try:
            resp, c = stub.Admit.with_call(req, timeout=deadline_s)
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
    return threads, answers


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

    threads, answers = hold_calls(sd, via_agent, DEADLINE_S)

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
        try:
            d = admit_direct()
        except grpc.RpcError as e:
            # staggerd may have closed this channel's idle connection (its
            # keepalive went unanswered while nothing polled it): the next
            # call reconnects.
            if e.code() != grpc.StatusCode.UNAVAILABLE:
                raise
            return False
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

    threads, answers = hold_calls(sd, via_agent, CRASH_DEADLINE_S)

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


PARTITION_S = 10
PARTITION_DEADLINE_S = 15.0


@pytest.fixture
def net2():
    n = Net(agents=2)
    yield n
    n.close()


def test_one_agent_cut_off_the_other_unaffected_counts_once(
        net2, procs, tmp_path):
    """Two agents, leases live; agent 0's link goes down for PARTITION_S
    while calls are held through it. Its held calls end by their deadline;
    once its lease has ended it answers from the fallback, and its metrics
    say so; agent 1 answers under its lease throughout. After the heal,
    agent 0's lease is back within seconds, and every local answer of both
    agents reached staggerd exactly once."""
    config = tmp_path / "config.textproto"
    config.write_text(
        "default_policy { breaker { consecutive_failures: 3 "
        "open_base { seconds: %d } open_max { seconds: %d } "
        "half_open_probes: 1 close_after_successes: 1 "
        "probe_timeout { seconds: %d } } }\n"
        % (OPEN_S * 3, OPEN_S * 3, 3))  # learning: 3 s, then leases
    sd = staggerd_in(net2, config, ())
    procs(sd)
    # Agent 0 flushes every second, so some of its counts are in flight or
    # unsent when its link goes down.
    agents = [agent_in(net2, str(tmp_path / "a0.sock"), agent=0, flush="1s"),
              agent_in(net2, str(tmp_path / "a1.sock"), agent=1)]
    for a in agents:
        procs(a)
    direct = rpc.RetryCoordinatorStub(grpc.insecure_channel(sd.target))
    via = [rpc.RetryCoordinatorStub(grpc.insecure_channel(a.target))
           for a in agents]

    def deliver(i, n):
        """A healthy first attempt and its success through agent i; the
        Admit's source."""
        ep = "https://healthy-%d-%d.example/hook" % (i, n)
        _, call = via[i].Admit.with_call(
            pb.AdmitRequest(endpoint=ep, attempt=1), timeout=10)
        via[i].Report(pb.ReportRequest(endpoint=ep, attempt=1,
                                       outcome=pb.SUCCESS), timeout=10)
        return source_of(call)
    poll_until("both agents leased",
               lambda: deliver(0, 0) == "lease" and deliver(1, 0) == "lease")
    for n in range(1, 41):
        assert deliver(0, n) == "lease"
    for _ in range(3):  # the breaker opens
        direct.Report(pb.ReportRequest(endpoint=EP, attempt=1,
                                       outcome=pb.RETRYABLE_FAILURE),
                      timeout=10)
    threads, answers = hold_calls(sd, via[0], PARTITION_DEADLINE_S)

    net2.link(up=False, agent=0)
    cut = time.monotonic()
    fallback_before = metric_sum(agents[0].scrape(),
                                 "stagger_client_fallback_decisions_total")
    # Agent 0's lease ends within its ttl (1 s); then it answers from the
    # fallback, and says so.
    n = [100]

    def next_source(i):
        n[0] += 1
        return deliver(i, n[0])
    poll_until("agent 0 off its lease", lambda: next_source(0) != "lease",
               timeout=5, interval=0.05)
    lease_ended = time.monotonic() - cut
    assert lease_ended < 1 + SLACK_S, lease_ended
    sources = set()
    while time.monotonic() - cut < PARTITION_S:
        sources.add(next_source(0))
        assert next_source(1) == "lease", "agent 1 lost its lease"
        time.sleep(0.2)
    assert sources == {"local"}, sources
    assert agents[0].scrape().get("stagger_client_leases") == 0.0
    assert metric_sum(agents[0].scrape(),
                      "stagger_client_fallback_decisions_total") > \
        fallback_before
    for t in threads:
        t.join(PARTITION_DEADLINE_S + SLACK_S)
    assert len(answers) == CALLS
    for started, ended, decision, source, error in answers:
        assert error is None, "a held call failed: %s" % error
        assert ended - started < PARTITION_DEADLINE_S, (ended - started)

    net2.link(up=True, agent=0)
    healed = time.monotonic()
    poll_until("agent 0 leased again", lambda: next_source(0) == "lease",
               timeout=10, interval=0.2)
    back = time.monotonic() - healed

    def counted_once():
        local = sum(metric_sum(a.scrape(),
                               "stagger_client_lease_decisions_total")
                    for a in agents)
        return metric_sum(sd.scrape(), "stagger_counted_total") == local
    poll_until("every local answer counted at staggerd", counted_once,
               timeout=10, interval=0.5)
    m = sd.scrape()
    assert m.get('stagger_count_reports_total{result="lost"}', 0) == 0
    log("agent 0's lease ended %.2fs after the cut; its held calls ended by"
        " %.2fs; its lease was back %.2fs after the heal; staggerd counted"
        " %d local answers, %d duplicate reports ignored"
        % (lease_ended, max(a[1] for a in answers) - cut, back,
           metric_sum(m, "stagger_counted_total"),
           m.get('stagger_count_reports_total{result="duplicate"}', 0)))
