"""Shared harness for the live metrics tests (live_scrape_test.py,
prometheus_test.py): starts the real staggerd (and Prometheus) on 127.0.0.1
with free ports, runs the traffic driver, parses the text exposition, and
always stops what it started. Every wait has a deadline; nothing sleeps to
"let things settle": readiness is polled from the real peers.

Runs under /usr/bin/python3 (Debian), standard library only.
"""

import ctypes
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

READY_RE = re.compile(r"staggerd:? listening on \S+")

# The only label values any stagger_* sample may carry (the metrics rule:
# fixed sets, never an endpoint key).
FIXED_LABELS = {
    "call": {"admit", "report"},
    "verdict": {"PROCEED", "DEFER", "GIVE_UP", "DONE"},
    "reason": {"INITIAL_JITTER", "BACKOFF", "RETRY_AFTER", "CIRCUIT_OPEN",
               "HALF_OPEN_PROBE", "BUDGET_EXHAUSTED", "ATTEMPTS_EXHAUSTED",
               "NOT_RETRYABLE", "DEADLINE", "SUCCEEDED", "HALF_OPEN_BUSY",
               "RETRY_AFTER_WINDOW", "ADMITTED", "PACED",
               "LAST_CHANCE", "PAUSED",
               # stagger_state_load_failures_total's reasons
               "missing", "unreadable", "truncated", "corrupt",
               "incompatible_version"},
    "from": {"CLOSED", "OPEN", "HALF_OPEN"},
    "to": {"CLOSED", "OPEN", "HALF_OPEN"},
    "breaker_state": {"CLOSED", "OPEN", "HALF_OPEN"},
    "method": {"Admit", "Report", "AdmitBatch", "ReportBatch", "GetEndpoint",
               "ListEndpoints"},
    "result": {"success", "failure"},
    "attempt": {str(a) for a in range(2, 21)} | {"overflow"},
    # Security series (server/security/security_metrics.h).
    "service": {"stagger.v1.RetryCoordinator", "stagger.v1.Admin",
                "grpc.health.v1.Health", "other"},
    "cause": {"deny_rule", "no_allow_rule"},
    "action": {"pause", "resume", "reset", "force_breaker"},
}

# Every family the server must expose, with its Prometheus type.
REQUIRED_FAMILIES = {
    "stagger_decisions_total": "counter",
    "stagger_retry_delay_seconds": "histogram",
    "stagger_retry_after_total": "counter",
    "stagger_retry_after_clamped_total": "counter",
    "stagger_budget_refusals_total": "counter",
    "stagger_untracked_decisions_total": "counter",
    "stagger_pace_cuts_total": "counter",
    "stagger_misrouted_requests_total": "counter",
    "stagger_breaker_transitions_total": "counter",
    "stagger_endpoints": "gauge",
    "stagger_endpoints_tracked": "gauge",
    "stagger_endpoints_evicted_total": "counter",
    "stagger_config_reloads_total": "counter",
    "stagger_rpc_duration_seconds": "histogram",
    "stagger_batch_size": "histogram",
    "stagger_state_load_failures_total": "counter",
    "stagger_state_endpoints_restored": "gauge",
    "stagger_state_saves_total": "counter",
    "stagger_state_last_save_timestamp_seconds": "gauge",
    "stagger_authz_denied_total": "counter",
    "stagger_authz_policy_reloads_total": "counter",
    "stagger_admin_actions_total": "counter",
}


_PR_SET_PDEATHSIG = 1


def _die_with_parent():
    """In the child before exec: get SIGKILL if the test process dies (for
    example killed by ctest's timeout), so no staggerd or Prometheus is left
    behind."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(
            _PR_SET_PDEATHSIG, signal.SIGKILL)
    except OSError:
        pass


def _exit_on_sigterm(signum, frame):
    raise SystemExit("terminated by signal %d" % signum)


# A SIGTERM to the test (ctest, a CI runner) unwinds through `finally`, which
# stops the children.
signal.signal(signal.SIGTERM, _exit_on_sigterm)


def log(*args):
    print("[%s]" % time.strftime("%H:%M:%S"), *args, file=sys.stderr,
          flush=True)


def free_port():
    """A port that was free a moment ago on 127.0.0.1 (callers retry on a
    lost race)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_get(url, timeout=10.0):
    """(status, body) of a GET; raises OSError/URLError if unreachable."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status, r.read().decode("utf-8")
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode("utf-8", "replace")


class Proc:
    """A child process with stdout/stderr in files under `workdir`."""

    def __init__(self, name, argv, workdir):
        self.name = name
        self.argv = argv
        self.log_path = os.path.join(workdir, name + ".log")
        self._log = open(self.log_path, "w")
        log("start", name + ":", " ".join(argv))
        self.popen = subprocess.Popen(argv, stdout=self._log,
                                      stderr=subprocess.STDOUT,
                                      stdin=subprocess.DEVNULL,
                                      preexec_fn=_die_with_parent)

    def output(self):
        with open(self.log_path, errors="replace") as f:
            return f.read()

    def alive(self):
        return self.popen.poll() is None

    def stop(self, timeout=20.0):
        """SIGTERM, then SIGKILL after `timeout`; returns the exit code."""
        if self.alive():
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                log(self.name, "did not exit on SIGTERM; SIGKILL")
                self.popen.kill()
                self.popen.wait(timeout=10)
        self._log.close()
        return self.popen.returncode

    def tail(self, n=40):
        return "\n".join(self.output().splitlines()[-n:])


def wait_until(what, predicate, timeout, interval=0.2):
    """Polls `predicate` (returns a truthy value when done) until `timeout`
    seconds pass; returns its last value or raises AssertionError."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = predicate()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError("timed out after %.0fs waiting for %s (last: %r)"
                         % (timeout, what, last))


def start_staggerd(binary, workdir, attempts=3):
    """Starts staggerd on free loopback ports and waits for its ready line
    and for /metrics to answer. Returns (proc, grpc_port, metrics_port)."""
    for attempt in range(attempts):
        grpc_port, metrics_port = free_port(), free_port()
        if grpc_port == metrics_port:
            continue
        proc = Proc("staggerd-%d" % attempt,
                    [binary, "--address", "127.0.0.1:%d" % grpc_port,
                     "--metrics_address", "127.0.0.1:%d" % metrics_port],
                    workdir)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and proc.alive():
            if READY_RE.search(proc.output()):
                break
            time.sleep(0.1)
        if proc.alive() and READY_RE.search(proc.output()):
            wait_until("staggerd /metrics",
                       lambda: _metrics_up(metrics_port), timeout=30)
            log("staggerd ready: grpc", grpc_port, "metrics", metrics_port)
            return proc, grpc_port, metrics_port
        log("staggerd did not start (port race?):\n" + proc.tail())
        proc.stop()
    raise AssertionError("staggerd did not start in %d attempts" % attempts)


def _metrics_up(port):
    try:
        return http_get("http://127.0.0.1:%d/metrics" % port, 5)[0] == 200
    except OSError:
        return False


def scrape(port):
    status, body = http_get("http://127.0.0.1:%d/metrics" % port, 10)
    assert status == 200, "GET /metrics: HTTP %d" % status
    return body


def run_driver(driver, grpc_port, workdir, rounds=1, timeout=120):
    """Runs the traffic driver; returns its JSON summary."""
    argv = [driver, "--target", "127.0.0.1:%d" % grpc_port,
            "--rounds", str(rounds)]
    log("run:", " ".join(argv))
    r = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=timeout, text=True)
    if r.returncode != 0:
        raise AssertionError("driver failed (%d):\n%s" % (r.returncode,
                                                          r.stderr))
    summary = json.loads(r.stdout.strip().splitlines()[-1])
    log("driver summary:", json.dumps(summary, sort_keys=True))
    return summary


_SAMPLE_RE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)')
_LABEL_RE = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def parse_exposition(text):
    """Text format -> (samples, types): samples are (name, {labels}, value),
    types maps family name -> TYPE."""
    samples, types = [], {}
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(None, 3)
            types[name] = kind.strip()
            continue
        if not line or line.startswith("#"):
            continue
        m = _SAMPLE_RE.match(line)
        assert m, "unparseable sample line: %r" % line
        labels = dict(_LABEL_RE.findall(m.group(3) or ""))
        samples.append((m.group(1), labels, float(m.group(4))))
    return samples, types


def value(samples, name, **labels):
    """The value of the sample `name` with exactly `labels`, or None."""
    for n, l, v in samples:
        if n == name and l == labels:
            return v
    return None


def decision_key(labels):
    return "%s/%s/%s" % (labels["call"], labels["verdict"], labels["reason"])


def check_against_driver(get, summary, rounds_factor=1):
    """Asserts the server's counters equal what the driver was answered.
    `get(name, **labels)` returns a value (None if absent); `summary` is the
    driver's (possibly summed) JSON. Returns a list of mismatch strings."""
    bad = []

    def expect(desc, got, want, tol=0.0):
        if got is None or abs(got - want) > tol:
            bad.append("%s: got %r, want %r" % (desc, got, want))

    for key, want in summary["decisions"].items():
        call, verdict, reason = key.split("/")
        expect("decisions %s" % key,
               get("stagger_decisions_total", call=call, verdict=verdict,
                   reason=reason), want)
    for attempt, want in summary["retry_delays"].items():
        expect("retry delay count attempt=%s" % attempt,
               get("stagger_retry_delay_seconds_count", attempt=attempt), want)
    expect("retry_after_total", get("stagger_retry_after_total"),
           summary["retry_after"])
    expect("retry_after_clamped_total", get("stagger_retry_after_clamped_total"),
           summary["retry_after_over_30s"])
    expect("budget_refusals_total", get("stagger_budget_refusals_total"),
           summary["budget_refusals"])
    for method, want in summary["rpcs"].items():
        expect("rpc count %s" % method,
               get("stagger_rpc_duration_seconds_count", method=method), want)
    for method, want in summary["batches"].items():
        expect("batch count %s" % method,
               get("stagger_batch_size_count", method=method), want)
        expect("batch items %s" % method,
               get("stagger_batch_size_sum", method=method),
               summary["batch_items"][method])
    return bad


def merge_summaries(a, b):
    out = {}
    for k in set(a) | set(b):
        va, vb = a.get(k), b.get(k)
        if isinstance(va if va is not None else vb, dict):
            va, vb = va or {}, vb or {}
            out[k] = {kk: va.get(kk, 0) + vb.get(kk, 0)
                      for kk in set(va) | set(vb)}
        elif k == "endpoints":  # distinct keys: the same ones each run
            out[k] = max(va or 0, vb or 0)
        else:
            out[k] = (va or 0) + (vb or 0)
    return out


def make_workdir(prefix):
    return tempfile.mkdtemp(prefix=prefix)
