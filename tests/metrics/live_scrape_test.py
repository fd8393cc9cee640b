#!/usr/bin/python3
"""Live scrape of the real staggerd: start it on loopback ports, drive known
traffic through the client library (metrics_traffic_driver), scrape
/metrics, and check that

  1. `promtool check metrics` accepts the page with no warning or error,
     before and after traffic;
  2. every staggerd family of the metric catalog (stagger-metric-catalog's
     JSON) is there with the catalog's TYPE and HELP;
  3. every stagger_* sample is of a catalog family, with exactly its labels
     and values from their fixed sets, and no endpoint key appears anywhere
     on the page (the check itself is shown to catch a renamed family, a
     changed HELP, an extra label and a value outside its set);
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


def check_catalog_check_bites(text, catalog):
    """h.catalog_errors finds a renamed family, a changed HELP, an extra
    label and a value outside its set on mutated copies of the page."""
    mutants = [
        ("stagger_pace_cuts_total", "stagger_pace_cut_total",
         "stagger_pace_cut_total is not in the metric catalog"),
        ("# HELP stagger_endpoints_tracked ",
         "# HELP stagger_endpoints_tracked Changed. ",
         "stagger_endpoints_tracked: no HELP"),
        ('stagger_endpoints{breaker_state="OPEN"}',
         'stagger_endpoints{breaker_state="OPEN",key="k"}',
         "stagger_endpoints labels"),
        ('breaker_state="HALF_OPEN"', 'breaker_state="HALFOPEN"',
         "'HALFOPEN' on stagger_endpoints"),
    ]
    for old, new, want in mutants:
        assert old in text, "mutation target %r not on the page" % old
        page = text.replace(old, new)
        samples, types = h.parse_exposition(page)
        bad = h.catalog_errors(page, samples, types, catalog)
        assert any(want in b for b in bad), \
            "the catalog check missed %r -> %r: %s" % (old, new, bad)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--staggerd", required=True)
    ap.add_argument("--driver", required=True)
    ap.add_argument("--promtool", default="/usr/bin/promtool")
    ap.add_argument("--prometheus", default="/usr/bin/prometheus")  # unused
    ap.add_argument("--catalog_tool", required=True)  # stagger-metric-catalog
    args = ap.parse_args()
    catalog = h.load_catalog(args.catalog_tool)
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

        # 2, 3. The catalog's families, labels and values, nothing else.
        assert "example" not in text, "an endpoint key leaked into /metrics"
        bad = h.catalog_errors(text, samples, types, catalog)
        assert not bad, "/metrics differs from the metric catalog:\n  " + \
            "\n  ".join(bad)
        check_catalog_check_bites(text, catalog)

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
