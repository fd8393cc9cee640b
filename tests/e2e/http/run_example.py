#!/usr/bin/python3
"""Runs the HTTP end-to-end scenario by hand (scenario.py; docs/EXAMPLE.md)
and prints what happened: every request the receiver answered and every
answer each worker had from the coordinator, in time order, then what was
measured and the checks e2e.http.delivery applies.

  scripts/build      # or only the targets it runs (docs/EXAMPLE.md)
  /usr/bin/python3 tests/e2e/http/run_example.py [--build build] 2>run.log

The processes' own logs (staggerd, the agent, the workers) go to stderr.
Exit 0 if every check held. Needs /usr/bin/python3 (Debian's grpcio) and
node.
"""

import argparse
import dataclasses
import json
import os
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", "..", ".."))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"),
                    help="the build folder (default: build/)")
    ap.add_argument("--no-timeline", action="store_true",
                    help="print only the summary and the checks")
    ap.add_argument("--save", metavar="FILE",
                    help="also write everything recorded (JSON: the "
                    "receiver's record, each worker's, the GetEndpoint "
                    "samples) to FILE")
    args = ap.parse_args()
    build = os.path.abspath(args.build)
    # The stagger package and its generated modules, for this process and
    # for the Python worker.
    path = [HERE, os.path.join(ROOT, "tests", "agent"),
            os.path.join(ROOT, "client", "python"),
            os.path.join(build, "client", "python", "gen")]
    os.environ["PYTHONPATH"] = os.pathsep.join(
        path + [p for p in os.environ.get("PYTHONPATH", "").split(
            os.pathsep) if p])
    sys.path[:0] = path
    # No __pycache__ left in the source tree, here or in the workers.
    sys.dont_write_bytecode = True
    os.environ["PYTHONDONTWRITEBYTECODE"] = "1"
    import scenario  # noqa: E402 -- needs the path above

    binaries = scenario.Binaries(
        staggerd=os.path.join(build, "bin", "staggerd"),
        agent=os.path.join(build, "bin", "stagger-agent"),
        cpp_worker=os.path.join(build, "bin", "stagger-http-worker"),
        js_worker=os.path.join(build, "tests", "e2e", "http", "dist",
                               "examples", "node", "http_worker.js"),
        node=shutil.which("node") or "node",
        go_worker=os.path.join(build, "tests", "e2e", "http", "go-worker"))
    missing = [p for p in (binaries.staggerd, binaries.agent,
                           binaries.cpp_worker, binaries.js_worker,
                           binaries.go_worker)
               if not os.path.exists(p)]
    if missing:
        print("run_example: not built: %s (docs/EXAMPLE.md says which "
              "targets)" % ", ".join(missing), file=sys.stderr)
        return 2

    run = scenario.run(binaries,
                       log=lambda *a: print(*a, file=sys.stderr, flush=True))
    problems, summary = scenario.evaluate(run)
    if args.save:
        with open(args.save, "w", encoding="utf-8") as f:
            json.dump(dataclasses.asdict(run), f, indent=1)
    if not args.no_timeline:
        print("=== timeline (seconds since the receiver's script started; "
              "the warm-up and the held burst before it) ===")
        print("\n".join(scenario.timeline(run)))
        print()
    print("=== what it measured ===")
    print("\n".join(summary))
    print()
    print("=== checks (e2e.http.delivery) ===")
    for what, p in problems.items():
        print("%s %s" % ("ok  " if not p else "FAIL", what))
        for line in p:
            print("       " + line)
    return 0 if not any(problems.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
