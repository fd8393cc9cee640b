#!/usr/bin/python3
"""Integration: a real Prometheus (Debian /usr/bin/prometheus) scrapes the
real staggerd every second, on loopback only. The test drives known traffic
through the client library (metrics_traffic_driver) twice and, through
Prometheus's HTTP query API (/api/v1/query), waits until

  * before traffic: Prometheus scrapes staggerd (up == 1) and every
    decision counter reads 0;
  * after each run: stagger_decisions_total{call,verdict,reason},
    stagger_retry_delay_seconds_count{attempt} (and the other counters the
    driver can predict) equal the running total of what the driver was
    answered, i.e. they moved by exactly the expected increase;
  * rate() over the decisions and the delay histogram's +Inf bucket behave
    as a dashboard would use them.

Every wait polls with a deadline (the first sample takes ~5-6 s; 60 s
allowed). Prometheus and staggerd are stopped in `finally`.
"""

import argparse
import json
import os
import shutil
import sys
import time
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import live_harness as h  # noqa: E402

POLL_TIMEOUT = 60.0
PROMETHEUS_LABELS = {"__name__", "job", "instance"}

# Every family check_against_driver reads.
QUERIED = ["stagger_decisions_total", "stagger_retry_delay_seconds_count",
           "stagger_retry_after_total", "stagger_retry_after_clamped_total",
           "stagger_budget_refusals_total", "stagger_rpc_duration_seconds_count",
           "stagger_batch_size_count", "stagger_batch_size_sum"]


class Prom:
    def __init__(self, port):
        self.base = "http://127.0.0.1:%d" % port

    def query(self, expr):
        """Instant query -> list of (labels, value); raises on API error."""
        url = "%s/api/v1/query?%s" % (self.base,
                                      urllib.parse.urlencode({"query": expr}))
        status, body = h.http_get(url, timeout=10)
        assert status == 200, "query %r: HTTP %d %s" % (expr, status, body)
        doc = json.loads(body)
        assert doc["status"] == "success", doc
        return [({k: v for k, v in r["metric"].items()
                  if k not in PROMETHEUS_LABELS}, float(r["value"][1]))
                for r in doc["data"]["result"]]

    def scalar(self, expr):
        r = self.query(expr)
        return r[0][1] if len(r) == 1 else None

    def getter(self):
        """A get(name, **labels) over one fresh query per family."""
        data = {name: self.query('%s{job="staggerd"}' % name)
                for name in QUERIED}

        def get(name, **labels):
            for l, v in data.get(name, []):
                if l == labels:
                    return v
            return None
        return get, data


def start_prometheus(binary, metrics_port, workdir, attempts=3):
    for attempt in range(attempts):
        port = h.free_port()
        config = os.path.join(workdir, "prometheus.yml")
        with open(config, "w") as f:
            f.write("""global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: staggerd
    static_configs:
      - targets: ['127.0.0.1:%d']
""" % metrics_port)
        data = os.path.join(workdir, "tsdb-%d" % attempt)
        proc = h.Proc("prometheus-%d" % attempt,
                      [binary, "--config.file=" + config,
                       "--storage.tsdb.path=" + data,
                       "--web.listen-address=127.0.0.1:%d" % port,
                       "--log.level=warn"], workdir)

        def ready():
            if not proc.alive():
                return "exited"
            try:
                return h.http_get("http://127.0.0.1:%d/-/ready" % port, 5)[0] == 200
            except OSError:
                return False
        try:
            if h.wait_until("Prometheus /-/ready", ready, 60) is True:
                h.log("prometheus ready on", port)
                return proc, Prom(port)
        except AssertionError as e:
            h.log(str(e))
        h.log("prometheus did not start:\n" + proc.tail())
        proc.stop()
    raise AssertionError("Prometheus did not start in %d attempts" % attempts)


def wait_for_counts(prom, summary, what):
    last = []

    def matches():
        get, _ = prom.getter()
        bad = h.check_against_driver(get, summary)
        last[:] = bad
        return not bad
    try:
        h.wait_until(what, matches, POLL_TIMEOUT, interval=0.5)
    except AssertionError:
        raise AssertionError("%s: Prometheus still differs after %.0fs:\n  %s"
                             % (what, POLL_TIMEOUT, "\n  ".join(last)))
    h.log(what + ": Prometheus agrees with the driver")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--staggerd", required=True)
    ap.add_argument("--driver", required=True)
    ap.add_argument("--promtool", default="/usr/bin/promtool")  # unused
    ap.add_argument("--prometheus", default="/usr/bin/prometheus")
    ap.add_argument("--catalog_tool")  # unused
    args = ap.parse_args()
    for tool in (args.staggerd, args.driver, args.prometheus):
        assert os.access(tool, os.X_OK), "not executable: %s" % tool

    workdir = h.make_workdir("stagger-prometheus-")
    procs = []
    ok = False
    try:
        staggerd, grpc_port, metrics_port = h.start_staggerd(args.staggerd,
                                                             workdir)
        procs.append(staggerd)
        prometheus, prom = start_prometheus(args.prometheus, metrics_port,
                                            workdir)
        procs.append(prometheus)

        # Baseline: scraped, and every decision series staggerd exposes
        # (one per outcome and reason it can answer) present at 0.
        series = sum(1 for line in h.scrape(metrics_port).splitlines()
                     if line.startswith("stagger_decisions_total{"))
        assert series > 100, "staggerd exposes %d decision series" % series
        t0 = time.monotonic()
        h.wait_until("first scrape of staggerd",
                     lambda: prom.scalar('up{job="staggerd"}') == 1.0 and
                     prom.scalar('count(stagger_decisions_total{job="staggerd"})')
                     == float(series), POLL_TIMEOUT, interval=0.5)
        h.log("first sample after %.1fs" % (time.monotonic() - t0))
        assert prom.scalar('sum(stagger_decisions_total{job="staggerd"})') == 0.0
        assert prom.scalar(
            'sum(stagger_retry_delay_seconds_count{job="staggerd"})') == 0.0

        # Run 1, then run 2: each time the counters must reach the running
        # total of the driver's answers.
        first = h.run_driver(args.driver, grpc_port, workdir)
        assert sum(first["retry_delays"].values()) >= 20, first
        assert set(first["retry_delays"]) == {"2", "3", "4"}, first
        wait_for_counts(prom, first, "after run 1")
        second = h.run_driver(args.driver, grpc_port, workdir)
        both = h.merge_summaries(first, second)
        wait_for_counts(prom, both, "after run 2")

        # Exact totals as a dashboard would sum them.
        total = prom.scalar('sum(stagger_decisions_total{job="staggerd"})')
        assert total == sum(both["decisions"].values()), (total, both)
        delays = sum(both["retry_delays"].values())
        assert prom.scalar(
            'sum(stagger_retry_delay_seconds_count{job="staggerd"})') == delays
        assert prom.scalar(
            'sum(stagger_retry_delay_seconds_bucket{job="staggerd",le="+Inf"})'
        ) == delays
        # The delays fall within the policy (default base 200 ms .. cap
        # 30 s, Retry-After clamped to 30 s + spread): the histogram's
        # largest observed bucket is at most the 45 s one.
        assert prom.scalar(
            'sum(stagger_retry_delay_seconds_bucket{job="staggerd",le="45"})'
        ) == delays
        # rate() sees traffic between the two runs' samples.
        rate = prom.scalar(
            'sum(rate(stagger_decisions_total{job="staggerd"}[1m]))')
        assert rate is not None and rate > 0, rate
        ok = True
        h.log("prometheus integration: all as expected")
    finally:
        for p in reversed(procs):
            rc = p.stop()
            if rc != 0:
                h.log("note: %s exited %r:\n%s" % (p.name, rc, p.tail()))
        if ok:
            shutil.rmtree(workdir, ignore_errors=True)
        else:
            h.log("logs kept in", workdir)
    print("PASS")


if __name__ == "__main__":
    main()
