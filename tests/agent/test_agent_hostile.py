"""Hostile lease-stream peers against a real staggerd, beside a real agent.

  * A peer that reads the snapshot, then sends but never reads again: each
    of its messages gets an answer (its renewal), which queues at staggerd
    once HTTP/2 flow control is full. staggerd cancels the stream at 256 queued answers
    (SyncService::kMaxQueuedAnswers).
  * A peer that sends the largest count reports the protocol allows:
    10,000 endpoints x 64 buckets each (640,000 buckets, 9.4 MB a message).
    staggerd applies at most 200,000 buckets a second per agent and drops
    the rest (stagger_sync_counts_dropped_total).

Throughout, staggerd's resident memory stays within RSS_BOUND_MIB of what
it was before the peers came, and the real agent keeps its lease: it
answers first attempts itself (`stagger-source: lease`).

The sync stubs are generated here from proto/ with the system protoc (the
Python client package carries the coordinator's only).
"""

import os
import subprocess
import sys
import threading
import time

import grpc

from agent_harness import Agent, Staggerd, log, metric_sum, poll_until

STAGGERD = os.environ["STAGGERD"]
AGENT = os.environ["STAGGER_AGENT"]
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(
    __file__))))
# staggerd's RSS growth allowed while the peers run (docs/OPERATING.md,
# "Limits"). Measured: +286-296 MiB, whether 3 or 12 largest reports come
# (one is parsed at a time; the allocator keeps the peak). A report's
# parsed form takes about 30 times its bytes.
RSS_BOUND_MIB = 512
ENDPOINTS = 10000
BUCKETS = 64
REPORTS = 4
MESSAGES = 20000


def sync_stubs(out):
    """Imports stagger.v1.sync_pb2 generated into `out`."""
    os.makedirs(out, exist_ok=True)
    subprocess.run(
        ["protoc", "-I", os.path.join(ROOT, "proto"), "--python_out=" + out,
         "--grpc_python_out=" + out,
         "--plugin=protoc-gen-grpc_python=/usr/bin/grpc_python_plugin",
         "stagger/v1/sync.proto", "stagger/v1/coordinator.proto"],
        check=True)
    sys.path.insert(0, out)
    for name in list(sys.modules):
        if name.startswith("stagger.v1") or name == "stagger":
            del sys.modules[name]  # the client package's copy
    from stagger.v1 import sync_pb2
    return sync_pb2


def rss_mib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    raise AssertionError("no VmRSS for %d" % pid)


def hello(pb, agent_id):
    up = pb.SyncUp(number=1)
    up.hello.agent_id = agent_id
    up.hello.incarnation = 7
    up.hello.protocol = 2
    up.hello.next_count_seq = 1
    return up


def open_raw(target):
    """A raw Sync call: requests and responses are bytes. Without BDP
    probing the peer's HTTP/2 window stays at its first 64 KiB, so a peer
    that stops reading stops taking bytes soon."""
    channel = grpc.insecure_channel(target, options=[
        ("grpc.max_send_message_length", 64 << 20),
        ("grpc.http2.bdp_probe", 0)])
    return channel, channel.stream_stream(
        "/stagger.v1.AgentSync/Sync",
        request_serializer=lambda b: b,
        response_deserializer=lambda b: b)


def test_hostile_peers_leave_staggerd_bounded_and_the_agent_leased(tmp_path):
    pb = sync_stubs(str(tmp_path / "gen"))
    sd = Staggerd(STAGGERD, extra=["--lease_ttl=1s"])
    agent = Agent(AGENT, str(tmp_path / "agent.sock"), sd.target)
    try:
        from stagger.v1 import coordinator_pb2 as cpb
        from stagger.v1 import coordinator_pb2_grpc as crpc
        via_agent = crpc.RetryCoordinatorStub(
            grpc.insecure_channel(agent.target))

        def answered_by_lease():
            _, call = via_agent.Admit.with_call(
                cpb.AdmitRequest(endpoint="https://healthy.example/hook",
                                 attempt=1), timeout=10)
            return dict(call.initial_metadata()).get(
                "stagger-source") == "lease"
        poll_until("the agent leased", answered_by_lease, timeout=30)
        before = rss_mib(sd.p.pid)
        peak = [before]
        stop = threading.Event()

        def watch_rss():
            while not stop.is_set() and sd.p.poll() is None:
                peak[0] = max(peak[0], rss_mib(sd.p.pid))
                time.sleep(0.05)
        watcher = threading.Thread(target=watch_rss, daemon=True)
        watcher.start()

        # The peer that reads the snapshot, then sends MESSAGES without
        # reading. It acks the snapshot's version, so each message of its
        # gets a renewal. Once staggerd stops taking its messages, the peer
        # reads what came: a cut stream, not every answer.
        channel, sync = open_raw(sd.target)
        snapshot = {}
        got_snapshot = threading.Event()

        def never_reads():
            yield hello(pb, "never-reads").SerializeToString()
            got_snapshot.wait(30)
            for n in range(2, MESSAGES + 2):
                yield pb.SyncUp(
                    number=n, acked_incarnation=snapshot["incarnation"],
                    acked_version=snapshot["version"]).SerializeToString()
        call = sync(never_reads(), timeout=120)
        first = pb.SyncDown.FromString(next(call))
        snapshot.update(incarnation=first.snapshot.incarnation,
                        version=first.snapshot.version)
        got_snapshot.set()

        def sync_in():
            return sd.scrape().get(
                'stagger_sync_messages_total{direction="in"}', 0)
        seen = [sync_in()]

        def stopped_taking():  # only the real agent's ~10 a second come
            time.sleep(1.0)
            now = sync_in()
            done = now - seen[0] < 100
            seen[0] = now
            return done
        poll_until("staggerd to stop taking the peer's messages",
                   stopped_taking, timeout=60)
        answers = 0
        try:
            for _ in call:
                answers += 1
        except grpc.RpcError:
            pass  # the cut: its status follows
        log("the peer that never read: %s after %d answers to %d messages"
            % (call.code(), answers, MESSAGES))
        assert call.code() in (grpc.StatusCode.RESOURCE_EXHAUSTED,
                               grpc.StatusCode.CANCELLED), call.code()
        assert answers < MESSAGES - 256, "every message was answered"
        channel.close()

        # The peer with the largest reports: one built, then re-sent with a
        # new message number and seq appended (protobuf merges them).
        report = pb.SyncUp()
        for e in range(ENDPOINTS):
            ec = report.counts.endpoints.add(
                endpoint="https://hostile-%05d.example/hook" % e)
            for b in range(BUCKETS):
                bucket = ec.buckets.add(first_attempts=1, successes=1)
                bucket.start.seconds = int(time.time()) - 600 + b
        body = report.SerializeToString()
        log("largest report: %.1f MB" % (len(body) / 1e6))
        channel, sync = open_raw(sd.target)

        def large():
            yield hello(pb, "largest-reports").SerializeToString()
            for i in range(REPORTS):
                suffix = pb.SyncUp(number=2 + i)
                suffix.counts.seq = 1 + i
                yield body + suffix.SerializeToString()
        started = time.monotonic()
        replies = sum(1 for _ in sync(large(), timeout=120))
        log("%d reports sent in %.1fs, %d answers"
            % (REPORTS, time.monotonic() - started, replies))
        channel.close()
        dropped = metric_sum(sd.scrape(), "stagger_sync_counts_dropped_total")
        log("count entries dropped by staggerd's caps: %d" % dropped)
        assert dropped > 0, "the per-agent rate cap never cut"

        stop.set()
        watcher.join()
        log("staggerd RSS: %.0f MiB before, %.0f MiB at the peak (+%.0f)"
            % (before, peak[0], peak[0] - before))
        assert peak[0] - before < RSS_BOUND_MIB, (before, peak[0])
        assert answered_by_lease(), "the real agent lost its lease"
    finally:
        agent.kill()
        sd.kill()
