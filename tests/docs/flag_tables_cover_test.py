#!/usr/bin/python3
"""docs.flag_tables_cover: every program with flags has its flag table
checked.

  flag_tables_cover_test.py --root DIR --covered PATH,... [--self_test]

Every C++ file of the repository that defines a flag (ABSL_FLAG) must lie
under one of the --covered paths (a folder or a file: the --folder of a
flags_documented test, so that program's flags are held to its guide's
table), or be one of the test fixtures below, which only tests run. And
each covered path must still define a flag (a stale entry is reported).
--self_test first plants an uncovered flag and a stale path and fails if
either goes uncaught.
"""

import argparse
import os
import re
import sys

SCANNED = ("agent", "bench", "client", "core", "examples", "server",
           "staggerctl", "tests")
# Programs only tests run, never a person: their flags are their test's
# business, not a guide's.
FIXTURES = {
    "tests/agent/agent_worker.cc": "the C++ worker tests/agent drives",
    "tests/metrics/metrics_traffic_driver.cc":
        "the traffic tests/metrics scrapes",
}
FLAG = re.compile(r"^\s*ABSL_FLAG\(", re.M)


def flag_files(root, overlay):
    """Repository paths of the C++ files that define a flag."""
    out = set()
    for top in SCANNED:
        for dirpath, dirs, names in os.walk(os.path.join(root, top)):
            dirs[:] = [d for d in dirs if d != "node_modules"]
            for n in names:
                if n.endswith((".cc", ".h")):
                    rel = os.path.relpath(os.path.join(dirpath, n), root)
                    with open(os.path.join(root, rel), encoding="utf-8",
                              errors="replace") as f:
                        if FLAG.search(f.read()):
                            out.add(rel)
    for rel, text in overlay.items():
        (out.add if FLAG.search(text) else out.discard)(rel)
    return out


def under(path, covered):
    return path == covered or path.startswith(covered.rstrip("/") + "/")


def check(files, covered):
    problems = []
    for f in sorted(files):
        if f in FIXTURES:
            continue
        if not any(under(f, c) for c in covered):
            problems.append(
                "%s defines flags, but no flags_documented test covers it: "
                "give its program a flag table in its guide and a test in "
                "tests/docs/CMakeLists.txt" % f)
    for c in covered:
        if not any(under(f, c) for f in files):
            problems.append("%s is covered but defines no flag (moved?)" % c)
    for f in FIXTURES:
        if f not in files:
            problems.append("fixture %s defines no flag (moved?)" % f)
    return problems


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", required=True)
    ap.add_argument("--covered", required=True)
    ap.add_argument("--self_test", action="store_true")
    args = ap.parse_args()
    covered = [c for c in args.covered.split(",") if c]
    problems = []
    if args.self_test:
        planted = flag_files(args.root, {
            "bench/planted/tool.cc": 'ABSL_FLAG(int, n, 1, "n");\n'})
        if not any(p.startswith("bench/planted/tool.cc defines flags")
                   for p in check(planted, covered)):
            problems.append("self-test: a planted uncovered flag was not "
                            "caught")
        if not any("bench/gone is covered but defines no flag" in p
                   for p in check(planted, covered + ["bench/gone"])):
            problems.append("self-test: a stale covered path was not caught")
    files = flag_files(args.root, {})
    problems += check(files, covered)
    for p in problems:
        print("FAIL: " + p)
    if problems:
        return 1
    print("OK: %d files define flags; every one is covered (%s) or a test "
          "fixture (%s)" % (len(files), ", ".join(covered),
                            ", ".join(sorted(FIXTURES))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
