#!/usr/bin/python3
"""conformance.coverage: the scenario files (README.md) are well formed and
cover what docs/CLIENT_CONTRACT.md promises.

  coverage_test.py [--scenarios DIR]

Checks: every file parses and holds "scenarios"; every scenario has a
unique snake_case name, an "about", "covers" tags, a "coordinator" (a list
or "dead") and deliveries, each with a trace that ends in an "end" event of
a known end; every event is one of the kinds README.md lists; at least 60
scenarios; and every tag in REQUIRED is covered by some scenario: each row
of the contract's table, every verdict after each call, cancellation at
each step, the deadline, a coordinator lost and back, invalid input, and
the fallback's parts. Then, as its self-test, it plants a gap (the
scenarios covering one required tag dropped) and a malformed scenario, and
fails if either goes uncaught.
"""

import argparse
import copy
import glob
import json
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

REQUIRED = [
    # The contract's table, one row each.
    "table:defer_to_waiting_call", "table:backoff_over_60s",
    "table:waiting_call_answered_by_fallback", "table:fallback_subset",
    "table:attempt_timeout", "table:invalid_input",
    # Every verdict after each call.
    "verdict:admit:PROCEED", "verdict:admit:DEFER", "verdict:admit:GIVE_UP",
    "verdict:admit:DONE", "verdict:report:PROCEED", "verdict:report:DEFER",
    "verdict:report:GIVE_UP", "verdict:report:DONE",
    "verdict:report_success:DONE", "verdict:report_success:other",
    # Waiting admission and Retry-After.
    "waiting:backoff", "waiting:defer", "waiting:over_60s", "waiting:off",
    "waiting:LAST_CHANCE", "reason:RELEASED", "retry_after",
    # Cancellation at each step.
    "cancel:before_start", "cancel:initial_delay", "cancel:admit",
    "cancel:send", "cancel:report", "cancel:backoff_sleep",
    "cancel:waiting_backoff", "cancel:park_sleep", "cancel:waiting_park",
    "cancel:owed_sleep", "cancel:fallback_sleep", "cancel:final_answer",
    # The delivery's deadline.
    "deadline:sent", "deadline:coordinator_give_up", "deadline:last_chance",
    "deadline:fallback_redraw", "deadline:fallback_give_up",
    "deadline:fallback_last_chance", "deadline:fallback_passed",
    # Lost and back; invalid input; the fallback's parts.
    "lost_and_back", "invalid_input:coordinator", "invalid_input:fallback",
    "invalid_input:report", "fallback:jitter", "fallback:backoff",
    "fallback:attempt_limit", "fallback:consecutive_trip",
    "fallback:ratio_trip", "fallback:retry_after",
    "fallback:retry_after_window", "fallback:probe", "fallback:reopen",
    # The rest of the loop.
    "park_limit", "min_park", "resume", "send_fails:io", "send_fails:timeout",
    "http_mapping",
]
ENDS = {"SUCCEEDED", "GAVE_UP", "DEFERRED", "CANCELLED", "ERROR"}
EVENTS = {"admit": 3, "report": 3, "sleep": 2, "send": 2, "end": 2}
NAME = re.compile(r"[a-z0-9_]+\Z")


def load(directory):
    """{file name: its JSON} for every scenarios/*.json."""
    out = {}
    for path in sorted(glob.glob(os.path.join(directory, "*.json"))):
        with open(path, encoding="utf-8") as f:
            out[os.path.basename(path)] = json.load(f)
    return out


def check_scenario(where, s):
    problems = []
    for key in ("name", "about", "covers", "coordinator", "deliveries"):
        if key not in s:
            problems.append("%s: no %r" % (where, key))
    if problems:
        return problems
    if not NAME.match(s["name"]):
        problems.append("%s: name %r is not snake_case" % (where, s["name"]))
    if not (isinstance(s["coordinator"], list) or s["coordinator"] == "dead"):
        problems.append("%s: coordinator must be a list or \"dead\"" % where)
    for k, d in enumerate(s["deliveries"]):
        trace = d.get("trace") or [[]]
        for ev in trace:
            if not ev or ev[0] not in EVENTS or len(ev) != EVENTS[ev[0]]:
                problems.append("%s delivery %d: bad event %r" % (where, k + 1, ev))
        last = trace[-1]
        if not last or last[0] != "end" or last[1].get("end") not in ENDS:
            problems.append("%s delivery %d: the trace must end with an end "
                            "event of %s" % (where, k + 1, sorted(ENDS)))
    return problems


def check(files):
    """Problems with the scenario files (empty: they hold)."""
    problems, names, covered = [], [], set()
    for fname, content in files.items():
        if "scenarios" not in content:
            problems.append("%s: no \"scenarios\"" % fname)
            continue
        for i, s in enumerate(content["scenarios"]):
            where = "%s[%d] %s" % (fname, i, s.get("name", "?"))
            problems += check_scenario(where, s)
            names.append(s.get("name"))
            covered.update(s.get("covers", []))
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        problems.append("names used twice: %s" % ", ".join(dupes))
    if len(names) < 60:
        problems.append("%d scenarios; the contract asks for at least 60"
                        % len(names))
    missing = [t for t in REQUIRED if t not in covered]
    if missing:
        problems.append("no scenario covers: %s" % ", ".join(missing))
    return problems


def self_test(files):
    """Failures to catch planted mistakes (empty: the check bites)."""
    failures = []
    gap = copy.deepcopy(files)
    for content in gap.values():
        content["scenarios"] = [s for s in content.get("scenarios", [])
                                if "cancel:owed_sleep" not in s["covers"]]
    if not any("cancel:owed_sleep" in p for p in check(gap)):
        failures.append("self-test: a required case left uncovered was not caught")
    bad = copy.deepcopy(files)
    first = next(iter(bad.values()))["scenarios"][0]
    first["deliveries"][0]["trace"].pop()  # no end event
    if not any("must end with an end event" in p for p in check(bad)):
        failures.append("self-test: a trace without its end was not caught")
    return failures


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--scenarios", default=os.path.join(HERE, "scenarios"))
    args = ap.parse_args()
    files = load(args.scenarios)
    problems = check(files) or self_test(files)
    for p in problems:
        print("FAIL: " + p)
    if not problems:
        print("OK: %d scenarios in %d files cover all %d required cases" % (
            sum(len(c["scenarios"]) for c in files.values()), len(files),
            len(REQUIRED)))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
