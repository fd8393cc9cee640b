"""Processes for the stagger-agent tests: the real staggerd and
stagger-agent binaries on loopback and Unix sockets, each waited for by its
"listening on" line, scraped over /metrics, and always stopped. Every wait
has a deadline; nothing sleeps to "let things settle".

Runs under /usr/bin/python3 with PYTHONPATH holding the generated stubs.
"""

import ctypes
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request

_PR_SET_PDEATHSIG = 1
# Generous: these tests share two cores with the rest of the suite.
START_TIMEOUT = 30.0
POLL_TIMEOUT = 20.0


def _die_with_parent():
    try:
        ctypes.CDLL("libc.so.6").prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except OSError:
        pass


def log(*args):
    print("[%s]" % time.strftime("%H:%M:%S"), *args, file=sys.stderr,
          flush=True)


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def poll_until(what, done, timeout=POLL_TIMEOUT, interval=0.02):
    deadline = time.monotonic() + timeout
    while True:
        if done():
            return
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting for " + what)
        time.sleep(interval)


class Proc:
    """A child process whose stderr is kept and echoed, ready once a line
    matches `ready` (its match is kept as .ready_match)."""

    def __init__(self, argv, ready, name):
        self.name = name
        self.argv = argv
        self.lines = []
        self.ready_match = None
        self._ready = threading.Event()
        self._ready_re = re.compile(ready)
        self.p = subprocess.Popen(argv, stderr=subprocess.PIPE, text=True,
                                  preexec_fn=_die_with_parent)
        threading.Thread(target=self._read, daemon=True).start()
        if not self._ready.wait(START_TIMEOUT) or self.ready_match is None:
            self.stop()
            raise AssertionError("%s did not start: %s\n%s" % (
                name, argv, "".join(self.lines)))

    def _read(self):
        for line in self.p.stderr:
            self.lines.append(line)
            sys.stderr.write("[%s] %s" % (self.name, line))
            m = self._ready_re.search(line)
            if m and self.ready_match is None:
                self.ready_match = m
                self._ready.set()
        self._ready.set()

    def metrics(self, port):
        """{"name{labels}": value} of the /metrics page on `port`."""
        text = urllib.request.urlopen(
            "http://127.0.0.1:%d/metrics" % port, timeout=10).read().decode()
        out = {}
        for line in text.splitlines():
            if line and not line.startswith("#"):
                key, value = line.rsplit(" ", 1)
                out[key] = float(value)
        return out

    def kill(self):
        if self.p.poll() is None:
            self.p.kill()
        self.p.wait(timeout=30)

    def stop(self):
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGTERM)
            try:
                self.p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait(timeout=30)
        return self.p.returncode


def metric_sum(metrics, name):
    return sum(v for k, v in metrics.items()
               if k == name or k.startswith(name + "{"))


class Staggerd(Proc):
    def __init__(self, binary, port=0, extra=()):
        super().__init__(
            [binary, "--address=127.0.0.1:%d" % port,
             "--metrics_address=127.0.0.1:0"] + list(extra),
            r"listening on 127\.0\.0\.1:(\d+) \(metrics on port (\d+)\)",
            "staggerd")
        self.port = int(self.ready_match.group(1))
        self.metrics_port = int(self.ready_match.group(2))
        self.target = "127.0.0.1:%d" % self.port

    def scrape(self):
        return self.metrics(self.metrics_port)


class Agent(Proc):
    def __init__(self, binary, socket_path, coordinator, extra=()):
        super().__init__(
            [binary, "--listen=unix:" + socket_path,
             "--coordinator=" + coordinator, "--metrics_address=127.0.0.1:0",
             "--flush_interval=100ms"] + list(extra),
            r"listening on (\S+) .*metrics on port (\d+)", "agent")
        self.target = "unix:" + socket_path
        self.metrics_port = int(self.ready_match.group(2))

    def scrape(self):
        return self.metrics(self.metrics_port)
