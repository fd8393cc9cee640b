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

def load_catalog(tool, exporter="staggerd"):
    """The metric catalog (core/metrics/metric_catalog.h), as printed by
    stagger-metric-catalog: {name: {"type", "help", "labels": {label: set of
    values}}} for the metrics `exporter` exposes. The only families, labels
    and label values a stagger_* sample may have (fixed sets, never an
    endpoint key)."""
    out = subprocess.run([tool], stdout=subprocess.PIPE, check=True,
                         text=True, timeout=60).stdout
    catalog = {}
    for m in json.loads(out)["metrics"]:
        if m["exporter"] != exporter:
            continue
        catalog[m["name"]] = {
            "type": m["type"], "help": m["help"],
            "labels": {l["name"]: set(l["values"]) for l in m["labels"]}}
    assert catalog, "no %s metrics in the catalog from %s" % (exporter, tool)
    return catalog


def family_of(sample_name, catalog):
    """The catalog family a sample belongs to (a histogram's _bucket, _sum
    and _count samples belong to the histogram), or None."""
    if sample_name in catalog:
        return sample_name
    for suffix in ("_bucket", "_sum", "_count"):
        base = sample_name[:-len(suffix)]
        if sample_name.endswith(suffix) and \
                catalog.get(base, {}).get("type") == "histogram":
            return base
    return None


def catalog_errors(text, samples, types, catalog):
    """What on a /metrics page differs from the catalog: a catalog family
    missing or with another TYPE or HELP; a stagger_* sample of no catalog
    family, or without exactly its family's labels, or with a value outside
    a label's fixed set. A list of strings, empty if none."""
    bad = []
    for name, spec in sorted(catalog.items()):
        if types.get(name) != spec["type"]:
            bad.append("%s: TYPE %r, catalog %r" % (
                name, types.get(name), spec["type"]))
        if "# HELP %s %s\n" % (name, spec["help"]) not in text:
            bad.append("%s: no HELP, or not the catalog's" % name)
    for name, labels, _ in samples:
        if not name.startswith("stagger_"):
            continue
        family = family_of(name, catalog)
        if family is None:
            bad.append("%s is not in the metric catalog" % name)
            continue
        want = catalog[family]["labels"]
        got = {k: v for k, v in labels.items() if k != "le"}
        if set(got) != set(want):
            bad.append("%s labels %s, catalog %s" % (
                name, sorted(got), sorted(want)))
            continue
        bad.extend("%s=%r on %s: not in the catalog's set" % (k, v, name)
                   for k, v in got.items() if v not in want[k])
    return bad


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
