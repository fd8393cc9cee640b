#!/usr/bin/python3
"""Live scrape of the real staggerd: start it on loopback ports, drive known
traffic through the client library (metrics_traffic_driver), scrape
/metrics, and check that

  1. `promtool check metrics` accepts the page with no warning or error,
     before and after traffic;
  2. every required family is there with the right TYPE and HELP;
  3. every stagger_* label value is from the fixed sets, and no endpoint key
     appears anywhere on the page;
  4. the counters equal exactly what the driver was answered (staggerd is
     fresh and nobody else talks to it): decisions by call/verdict/reason,
     retry delays by attempt (count and sum), Retry-After seen/clamped,
     RPCs by method, batch sizes, endpoints tracked.

Bounded: every wait has a deadline; staggerd is stopped in `finally`.
"""

import argparse
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import live_harness as h  # noqa: E402


def promtool_check(promtool, text, workdir, label):
    path = os.path.join(workdir, "metrics-%s.txt" % label)
    with open(path, "w") as f:
        f.write(text)
    with open(path) as f:
        r = subprocess.run([promtool, "check", "metrics"], stdin=f,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True, timeout=60)
    out = r.stdout.strip()
    assert r.returncode == 0 and not out, (
        "promtool check metrics (%s) rc=%d:\n%s\n(page saved in %s)"
        % (label, r.returncode, out, path))
    h.log("promtool check metrics (%s): clean" % label)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--staggerd", required=True)
    ap.add_argument("--driver", required=True)
    ap.add_argument("--promtool", default="/usr/bin/promtool")
    ap.add_argument("--prometheus", default="/usr/bin/prometheus")  # unused
    args = ap.parse_args()
    for tool in (args.staggerd, args.driver, args.promtool):
        assert os.access(tool, os.X_OK), "not executable: %s" % tool

    workdir = h.make_workdir("stagger-live-scrape-")
    proc = None
    ok = False
    try:
        proc, grpc_port, metrics_port = h.start_staggerd(args.staggerd, workdir)

        # 1a. The page before any traffic is already valid.
        promtool_check(args.promtool, h.scrape(metrics_port), workdir, "idle")

        summary = h.run_driver(args.driver, grpc_port, workdir)
        # The scenario must have produced retry delays and deferrals, or the
        # histogram checks below would be vacuous.
        assert sum(summary["retry_delays"].values()) >= 20, summary
        assert set(summary["retry_delays"]) == {"2", "3", "4"}, summary
        assert summary["retry_after"] >= 2, summary

        text = h.scrape(metrics_port)
        # 1b. And after traffic.
        promtool_check(args.promtool, text, workdir, "traffic")
        samples, types = h.parse_exposition(text)

        # 2. Families, types, help.
        for name, kind in h.REQUIRED_FAMILIES.items():
            assert types.get(name) == kind, "%s: TYPE %r, want %r" % (
                name, types.get(name), kind)
            assert "# HELP %s " % name in text, "%s has no HELP" % name

        # 3. Fixed label sets; no endpoint key anywhere.
        assert "example" not in text, "an endpoint key leaked into /metrics"
        for name, labels, _ in samples:
            if not name.startswith("stagger_"):
                continue
            for k, v in labels.items():
                if k == "le":
                    continue
                assert k in h.FIXED_LABELS, "unexpected label %s on %s" % (k, name)
                assert v in h.FIXED_LABELS[k], "%s=%r on %s" % (k, v, name)

        # 4. Exact counts.
        def get(name, **labels):
            return h.value(samples, name, **labels)

        bad = h.check_against_driver(get, summary)
        total = sum(v for n, _, v in samples if n == "stagger_decisions_total")
        want_total = sum(summary["decisions"].values())
        if total != want_total:
            bad.append("sum(decisions_total) %r != driver's %r" % (total, want_total))
        delay_sum = sum(v for n, _, v in samples
                        if n == "stagger_retry_delay_seconds_sum")
        if abs(delay_sum - summary["retry_delay_sum"]) > 1e-3:
            bad.append("retry delay sum %r != driver's %r"
                       % (delay_sum, summary["retry_delay_sum"]))
        if get("stagger_endpoints_tracked") != summary["endpoints"]:
            bad.append("endpoints_tracked %r != %r" % (
                get("stagger_endpoints_tracked"), summary["endpoints"]))
        states = sum(v for n, _, v in samples if n == "stagger_endpoints")
        if states != summary["endpoints"]:
            bad.append("sum(stagger_endpoints) %r != %r" % (
                states, summary["endpoints"]))
        assert not bad, "metrics differ from the driver's answers:\n  " + \
            "\n  ".join(bad)
        h.log("live scrape: %d stagger_* samples, all as expected"
              % sum(1 for n, _, _ in samples if n.startswith("stagger_")))
        ok = True
    finally:
        if proc is not None:
            rc = proc.stop()
            if rc != 0:
                h.log("note: staggerd exited %r after SIGTERM:\n%s" % (rc, proc.tail()))
        if ok:
            shutil.rmtree(workdir, ignore_errors=True)
        else:
            h.log("logs kept in", workdir)
    print("PASS")


if __name__ == "__main__":
    main()
