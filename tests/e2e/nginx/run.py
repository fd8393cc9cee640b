#!/usr/bin/python3
"""A fleet against a real rate limiter: workers in C++
(examples/cpp/http_worker.cc) and Python (examples/python/http_worker.py)
deliver real HTTP POSTs
through one stagger-agent in front of one staggerd, both on their embedded
defaults, to Debian's nginx on loopback (limiter.py): `limit_req` of
--rate/s with a burst of --burst, 429 beyond.

  1. nginx starts down: every request is answered 503.
  2. Each worker starts all of its deliveries at once (a thread each,
     deadline 300 s); the outage lasts --outage seconds from when every
     worker has started them.
  3. The endpoint recovers (the limiter takes --rate/s); the parked
     backlog comes back at the pace staggerd learns; the run ends when
     every worker has written its result.

What it measured, from nginx's access log (checks.py): every delivery
answered 200 once, the attempts while down, the over-capacity answers
(429), the time from the recovery to 99% and 100% delivered, what each
worker gave up, and per second after the recovery the 200s and 429s.

  /usr/bin/python3 tests/e2e/nginx/run.py [--build build] [--cpp 200]
      [--py 200] [--rate 50] [--burst 5] [--outage 5] [--json FILE]

tests/e2e/nginx/test_nginx_e2e.py runs it small (ctest e2e.nginx.limiter);
bench/run's "limiter" section runs it full size (1,600 deliveries at
200/s, burst 20). Exit 0 if every delivery arrived exactly once and
nothing was given up. Needs /usr/bin/python3 (Debian's grpcio) and nginx.
"""

import argparse
import dataclasses
import json
import os
import sys
import tempfile
import time
from typing import Any, Callable, Dict, List, Optional

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", "..", ".."))
sys.path[:0] = [HERE, os.path.join(ROOT, "tests", "agent"),
                os.path.join(ROOT, "tests", "e2e", "http")]

import checks  # noqa: E402
from agent_harness import Agent, Proc, Staggerd, log  # noqa: E402
from limiter import Nginx  # noqa: E402

PY_WORKER = os.path.join(ROOT, "examples", "python", "http_worker.py")
DEADLINE_S = 300         # per delivery: far past the outage
ATTEMPT_TIMEOUT_S = 30
WORKER_TIMEOUT_S = 600   # the run's bound (a slow, shared machine)
PY_PER_PROCESS = 400     # Python deliveries per worker process


@dataclasses.dataclass
class Sizes:
    cpp: int = 200       # deliveries by the C++ worker
    py: int = 200        # deliveries by Python workers
    rate: int = 50       # the limiter's requests/s
    burst: int = 5
    outage_s: float = 5

    @property
    def deliveries(self) -> int:
        return self.cpp + self.py


@dataclasses.dataclass
class Run:
    sizes: Sizes
    ids: Dict[str, List[str]]            # worker -> its deliveries' ids
    log: List[checks.Request]            # nginx's access log
    workers: Dict[str, Dict[str, Any]]   # worker -> its JSON ({} if none)
    exit_codes: Dict[str, Optional[int]]  # None: killed at the bound
    recovered_at: float                  # Unix s


class Worker(Proc):
    """A worker process; ready once it has started all its deliveries."""

    def __init__(self, name: str, argv: List[str], out: str) -> None:
        self.out = out
        super().__init__(argv, r"warm-up deliveries done", name)

    def finish(self, deadline: float) -> Optional[int]:
        try:
            return self.p.wait(timeout=max(1.0, deadline - time.monotonic()))
        except Exception:  # noqa: BLE001 -- the bound passed
            self.kill()
            return None

    def result(self) -> Dict[str, Any]:
        try:
            with open(self.out, encoding="utf-8") as f:
                return json.load(f)
        except (OSError, ValueError):
            return {}


def worker_plan(sizes: Sizes) -> Dict[str, List[str]]:
    """{worker name: its deliveries' ids}: one C++ worker, Python workers of
    up to PY_PER_PROCESS deliveries each."""
    plan: Dict[str, List[str]] = {}
    if sizes.cpp:
        plan["cpp"] = ["cpp-%d" % k for k in range(sizes.cpp)]
    for p in range(0, sizes.py, PY_PER_PROCESS):
        name = "py%d" % (p // PY_PER_PROCESS)
        plan[name] = ["%s-%d" % (name, k)
                      for k in range(p, min(sizes.py, p + PY_PER_PROCESS))]
    return plan


def run(build: str, sizes: Sizes,
        say: Callable[..., None] = log) -> Run:
    """Starts everything, makes the outage and the recovery, lets the
    workers finish, stops everything."""
    work = tempfile.mkdtemp(prefix="stagger-nginx-e2e-")
    plan = worker_plan(sizes)
    procs: List[Proc] = []
    workers: List[Worker] = []
    nginx = Nginx(sizes.rate, sizes.burst, down=True)
    try:
        sd = Staggerd(os.path.join(build, "bin", "staggerd"))
        procs.append(sd)
        # The agent's calls get seconds: on a loaded machine a timed-out
        # call would be decided by the agent's own fallback. Threads:
        # waiting Admits each hold one while the coordinator holds them.
        agent = Agent(os.path.join(build, "bin", "stagger-agent"),
                      os.path.join(work, "agent.sock"), sd.target,
                      extra=["--call_deadline=5s", "--threads=256"])
        procs.append(agent)
        url = nginx.url + "/t0k3n"
        say("nginx at %s: %d/s, burst %d, down" % (url, sizes.rate,
                                                   sizes.burst))
        for name, ids in plan.items():
            argv = ([os.path.join(build, "bin", "stagger-http-worker")]
                    if name == "cpp" else ["/usr/bin/python3", PY_WORKER])
            out = os.path.join(work, name + ".json")
            workers.append(Worker(name, argv + [
                "--target=" + agent.target, "--url=" + url, "--name=" + name,
                "--ids=" + ",".join(ids), "--deadline_s=%d" % DEADLINE_S,
                "--attempt_timeout_s=%d" % ATTEMPT_TIMEOUT_S,
                "--out=" + out], out))
        say("every worker started its deliveries; down for %gs more"
            % sizes.outage_s)
        time.sleep(sizes.outage_s)
        nginx.down(False)
        recovered_at = time.time()
        say("recovered")
        deadline = time.monotonic() + WORKER_TIMEOUT_S
        exit_codes = {w.name: w.finish(deadline) for w in workers}
        nginx.stop()
        return Run(sizes, plan, nginx.log(),
                   {w.name: w.result() for w in workers}, exit_codes,
                   recovered_at)
    finally:
        for w in workers:
            w.kill()  # only if the run failed before they ended
        for p in reversed(procs):
            p.stop()
        nginx.stop()


def problems(r: Run, over_capacity_share: float) -> Dict[str, List[str]]:
    """{what: problems} (all empty: it holds)."""
    return {
        "every worker finished": [
            "%s exited %s" % (w, "(killed at the bound)" if c is None else c)
            for w, c in sorted(r.exit_codes.items()) if c != 0],
        "every delivery arrived exactly once": checks.exactly_once(
            [i for ids in r.ids.values() for i in ids], r.log),
        "nothing given up": checks.nothing_given_up(r.workers, r.ids),
        "over-capacity answers within %.0f%% of the deliveries"
        % (over_capacity_share * 100): checks.within(
            checks.over_capacity(r.log), r.sizes.deliveries,
            over_capacity_share),
    }


def summary(r: Run) -> List[str]:
    """What it measured, for a person (and bench/run)."""
    n = r.sizes.deliveries
    down = sum(1 for t, s, _ in r.log if s == 503 and t < r.recovered_at)
    given_up = sum(1 for w in r.workers.values()
                   for d in w.get("deliveries", [])
                   if d.get("end") != "SUCCEEDED")

    def secs(t: Optional[float]) -> str:
        return "never" if t is None else "%.1f s" % t
    limit = n / r.sizes.rate
    lines = [
        "%d deliveries (C++ %d, Python %d) to nginx limit_req rate=%dr/s "
        "burst=%d, down %gs first" % (n, r.sizes.cpp, r.sizes.py,
                                      r.sizes.rate, r.sizes.burst,
                                      r.sizes.outage_s),
        "attempts while down (503): %d" % down,
        "over-capacity answers (429): %d (%.1f%% of deliveries)" % (
            checks.over_capacity(r.log), 100.0 * checks.over_capacity(r.log)
            / max(1, n)),
        "from the recovery to 99%% delivered: %s; to 100%%: %s (backlog at "
        "the limiter's rate: %.1f s)" % (
            secs(checks.recovery(r.log, r.recovered_at, n, 0.99)),
            secs(checks.recovery(r.log, r.recovered_at, n, 1.0)), limit),
        "given up: %d" % given_up,
        "",
        "| Second after recovery | 200 | 429 |",
        "|---:|---:|---:|",
    ]
    lines += ["| %d | %d | %d |" % row
              for row in checks.per_second(r.log, r.recovered_at)]
    return lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--cpp", type=int, default=Sizes.cpp)
    ap.add_argument("--py", type=int, default=Sizes.py)
    ap.add_argument("--rate", type=int, default=Sizes.rate)
    ap.add_argument("--burst", type=int, default=Sizes.burst)
    ap.add_argument("--outage", type=float, default=Sizes.outage_s)
    ap.add_argument("--json", metavar="FILE",
                    help="also write the figures as JSON to FILE")
    args = ap.parse_args()
    build = os.path.abspath(args.build)
    os.environ["PYTHONPATH"] = os.pathsep.join(
        [os.path.join(ROOT, "client", "python"),
         os.path.join(build, "client", "python", "gen")] +
        [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])
    os.environ["PYTHONDONTWRITEBYTECODE"] = "1"
    sizes = Sizes(args.cpp, args.py, args.rate, args.burst, args.outage)
    r = run(build, sizes, say=lambda *a: print(*a, file=sys.stderr,
                                               flush=True))
    print("\n".join(summary(r)))
    found = problems(r, over_capacity_share=1.0)  # bench: report, not judge
    for what, p in found.items():
        print("%s %s" % ("ok  " if not p else "FAIL", what))
        for line in p[:10]:
            print("       " + line)
    if args.json:
        n = sizes.deliveries
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({
                "deliveries": n,
                "over_capacity": checks.over_capacity(r.log),
                "recovery_to_99_s": checks.recovery(r.log, r.recovered_at,
                                                    n, 0.99),
                "recovery_to_100_s": checks.recovery(r.log, r.recovered_at,
                                                     n, 1.0),
                "given_up": sum(1 for w in r.workers.values()
                                for d in w.get("deliveries", [])
                                if d.get("end") != "SUCCEEDED"),
                "per_second": checks.per_second(r.log, r.recovered_at),
            }, f)
    return 0 if not any(found.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
