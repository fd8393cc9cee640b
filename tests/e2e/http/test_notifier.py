"""e2e.http.notifier: stagger-notifier (examples/cpp/notifier.cc)
against a real staggerd and the e2e webhook receiver (receiver.py, run in
this process so that the test reads every body it got).

The receiver first answers 503 with Retry-After: 1, then 200: the
notifier's deliveries go through Stagger (the notification URL's key is
tracked by staggerd, and the first event needed more than one attempt).
Operators disable an endpoint, pause a prefix and enable the endpoint
(staggerctl); each event reaches the receiver once, as a structured
CloudEvent: specversion 1.0, a unique id, type dev.stagger.endpoint.<kind>,
the endpoint (or "prefix:<p>") as subject, the watch's event as data, and
Content-Type application/cloudevents+json. The events of the notification
URL's own endpoint are not notified.

Every wait polls with a generous deadline; nothing sleeps and assumes.
"""

import json
import os
import re
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import receiver as rcv  # noqa: E402

WAIT_S = 60


def poll(what, fn, timeout=WAIT_S):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = fn()
        if got:
            return got
        time.sleep(0.05)
    raise AssertionError("timed out waiting for " + what)


class Recording(rcv.Receiver):
    """The e2e receiver, keeping every body and Content-Type too."""

    def __init__(self, script):
        super().__init__(script)
        self.bodies = []
        self.lock = threading.Lock()

    def answer(self, body):
        with self.lock:
            self.bodies.append(json.loads(body))
        return super().answer(body)


class Proc:
    def __init__(self, argv, ready):
        self.p = subprocess.Popen(argv, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True)
        self.lines = []
        self.match = None
        self._ready = re.compile(ready)
        self._seen = threading.Event()
        threading.Thread(target=self._read, daemon=True).start()
        if not self._seen.wait(WAIT_S):
            raise AssertionError("%s: no %r in:\n%s" % (argv[0], ready,
                                                        "\n".join(self.lines)))

    def _read(self):
        for line in self.p.stdout:
            self.lines.append(line.rstrip("\n"))
            m = self._ready.search(line)
            if m and self.match is None:
                self.match = m
                self._seen.set()

    def stop(self):
        if self.p.poll() is None:
            self.p.terminate()
            try:
                self.p.wait(30)
            except subprocess.TimeoutExpired:
                self.p.kill()


def ctl(target, *args):
    r = subprocess.run([os.environ["STAGGERCTL"], "--address=" + target]
                       + list(args), capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, (args, r.stdout, r.stderr)
    return r.stdout


def test_notifier_posts_cloudevents_through_stagger():
    script = rcv.Script.parse({"phases": [
        {"at": 0, "status": 503, "retry_after": 1},
        {"at": 2, "status": 200}]})
    receiver = Recording(script)
    content_types = []
    handler = rcv.make_handler(receiver)

    class Handler(handler):
        def do_POST(self):
            content_types.append(self.headers.get("Content-Type"))
            super().do_POST()

    server = rcv.Server(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = "http://127.0.0.1:%d/events" % server.server_address[1]
    procs = []
    try:
        sd = Proc([os.environ["STAGGERD"], "--address=127.0.0.1:0",
                   "--metrics_address=", "--replica_name=stagger-0"],
                  r"listening on 127\.0\.0\.1:(\d+)")
        procs.append(sd)
        target = "127.0.0.1:" + sd.match.group(1)
        notifier = Proc([os.environ["STAGGER_NOTIFIER"],
                         "--coordinator=" + target, "--url=" + url],
                        r"watch: .* connected")
        procs.append(notifier)

        ctl(target, "disable", "https://tenant.example/hooks",
            "--reason", "tenant deleted it")
        ctl(target, "pause", "--prefix", "https://partner.example/",
            "--for", "10m", "--reason", "migration")
        ctl(target, "enable", "https://tenant.example/hooks")

        def acked():
            with receiver.lock:
                types = [b.get("type") for b in receiver.bodies]
            return len(receiver.record()["acks"]) >= 3 and types
        poll("three CloudEvents acknowledged", acked)
        record = receiver.record()
        assert record["duplicates"] == [], (record, notifier.lines)
        assert record["malformed"] == [], record["malformed"]
        with receiver.lock:
            bodies = list(receiver.bodies)
        acked_ids = set(record["acks"])
        got = {}
        for b in bodies:
            if b["id"] in acked_ids:
                got[b["id"]] = b
        by_type = {b["type"]: b for b in got.values()}
        assert set(by_type) == {"dev.stagger.endpoint.disabled",
                                "dev.stagger.endpoint.paused",
                                "dev.stagger.endpoint.enabled"}, sorted(by_type)
        for b in got.values():
            assert b["specversion"] == "1.0"
            assert b["source"] == "stagger://stagger-0"
            assert b["datacontenttype"] == "application/json"
            assert re.match(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$", b["time"])
            assert b["data"]["replica"] == "stagger-0"
            assert int(b["data"]["sequence"]) >= 1
        disabled = by_type["dev.stagger.endpoint.disabled"]
        assert disabled["subject"] == "https://tenant.example/hooks"
        assert disabled["data"]["kind"] == "EVENT_DISABLED"
        assert disabled["data"]["disabled"]["reason"] == "tenant deleted it"
        assert disabled["data"]["disabled"]["trigger"] == "DISABLE_TRIGGER_OPERATOR"
        paused = by_type["dev.stagger.endpoint.paused"]
        assert paused["subject"] == "prefix:https://partner.example/"
        assert paused["data"]["pause"]["reason"] == "migration"
        # Retries through Stagger: the 503s were retried (a request of the
        # first event before its 200), and staggerd tracks the URL's key.
        first = disabled["id"]
        statuses = [r["status"] for r in record["requests"] if r["id"] == first]
        assert statuses[0] == 503 and statuses[-1] == 200, statuses
        assert all(c == "application/cloudevents+json" for c in content_types)
        key = "http://127.0.0.1:%d/events" % server.server_address[1]
        state = json.loads(ctl(target, "get", key, "--json"))["state"]
        assert state["endpoint"] == key
        # The URL's own events (its Retry-After window) were not notified.
        assert not any(b["subject"] == key for b in bodies)
        assert any(line.startswith("notified dev.stagger.endpoint.disabled")
                   for line in notifier.lines), notifier.lines
    finally:
        for p in reversed(procs):
            p.stop()
        server.shutdown()
