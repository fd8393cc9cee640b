"""The HTTP end-to-end run: one staggerd, one stagger-agent in front of it
on a Unix socket, a real webhook receiver (receiver.py) on loopback, and
four workers -- C++ (http_worker.cc), Python (http_worker.py), TypeScript
(http_worker.ts), Go (go/http_worker), all under examples/ -- delivering real HTTP POSTs to it through
the agent.

  1. Warm-up: each worker delivers WARMUPS deliveries one after another;
     the receiver answers 200 (before its script starts).
  2. Each worker then starts its DELIVERIES at once. The receiver holds
     their first requests until every one of them has arrived (a burst
     that reaches the endpoint together), then starts its script (t = 0)
     and answers the whole burst by the phase at 0:
       t in [0, 7)   503, "Retry-After: 3"
       t in [7, 13)  429, no Retry-After (the breaker trips)
       t >= 13       200, each answered after 250 ms
     So every first attempt precedes every Retry-After window: the
     coordinator holds retries to an endpoint's Retry-After window, not
     first attempts of new deliveries (core/engine/decision_path.h).
  3. The burst's retries come back when the coordinator lets them, about
     3 s later, still in the 503 phase: the first of them receives a
     Retry-After of its own, which the coordinator then holds every other
     worker's retries to. Retries that come back after 7 s meet 429s, the
     breaker opens, half-opens, its probes fail until 13 s; then they
     succeed, the breaker closes and the parked deliveries are released at
     the pace the coordinator learns. The receiver answers them slowly, as
     a recovering endpoint does: the coordinator measures the round trip
     from the breaker's probes and grows the pace per round trip, and on
     loopback an instant answer would make that round trip ~0 and the pace
     thousands per second at once.
While it runs, a sampler asks staggerd's GetEndpoint for the endpoint
every SAMPLE_INTERVAL (release_pace.per_second, releasing, breaker).

The endpoint key is the URL's scheme, host, port and first path segment
("http://127.0.0.1:PORT/hooks"): the token after it never reaches the
coordinator. Each worker computes it with its own language's function.

run() returns a Run; checks.py says what it must show; timeline() prints
it for a person (run_example.py).
"""

import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from typing import Any, Callable, Dict, List, Optional, Tuple

import grpc

import checks
from agent_harness import Agent, Proc, Staggerd, _die_with_parent
from stagger import endpoint_key_from_url
from stagger.v1 import coordinator_pb2 as pb, coordinator_pb2_grpc as rpc

HERE = os.path.dirname(os.path.abspath(__file__))
CONFIG = os.path.join(HERE, "staggerd.textproto")
EXAMPLES = os.path.normpath(os.path.join(HERE, "..", "..", "..", "examples"))
RETRY_AFTER_S = 3
PHASES = [{"at": 0, "status": 503, "retry_after": RETRY_AFTER_S},
          {"at": 7, "status": 429},
          {"at": 13, "status": 200, "delay": 0.25}]
WORKERS = ("cpp", "py", "ts", "go")
WARMUPS = 3          # per worker
DELIVERIES = 12      # per worker, at once
DEADLINE_S = 300     # per delivery: far past the receiver's bad 13 s
# Per attempt: the burst's first requests wait in the receiver's hold
# until the slowest worker has started all of its deliveries; the hold
# gives up first (the record then says so, and the test fails saying so).
ATTEMPT_TIMEOUT_S = 120
HOLD_TIMEOUT_S = 100
SAMPLE_INTERVAL = 0.05
# Generous: the run shares two cores with the rest of the suite.
WORKER_TIMEOUT = 420
TOKEN = "t0k3n-that-must-not-leave-the-worker"


@dataclasses.dataclass(frozen=True)
class Binaries:
    staggerd: str
    agent: str
    cpp_worker: str
    js_worker: str   # http_worker.ts compiled (the build tree's dist/)
    node: str
    go_worker: str   # examples/go/http_worker built on client/go
    python: str = "/usr/bin/python3"

    @staticmethod
    def from_env() -> "Binaries":
        """From STAGGERD, STAGGER_AGENT, HTTP_WORKER_CPP, HTTP_WORKER_JS,
        NODE and HTTP_WORKER_GO (tests/e2e/http/CMakeLists.txt sets them)."""
        names = ["STAGGERD", "STAGGER_AGENT", "HTTP_WORKER_CPP",
                 "HTTP_WORKER_JS", "NODE", "HTTP_WORKER_GO"]
        missing = [n for n in names if not os.environ.get(n)]
        if missing:
            raise RuntimeError("set %s (the build sets them for ctest; "
                               "without node the TypeScript worker is not "
                               "built: run scripts/setup)" % ", ".join(missing))
        return Binaries(*(os.environ[n] for n in names))


@dataclasses.dataclass
class Run:
    key: str                          # the endpoint key (Python's)
    ids: Dict[str, List[str]]         # worker -> its deliveries' ids
    record: Dict[str, Any]            # the receiver's
    workers: Dict[str, Dict[str, Any]]  # worker -> its JSON ({} if none)
    exit_codes: Dict[str, Optional[int]]  # None: killed at WORKER_TIMEOUT
    samples: List[Dict[str, Any]]     # GetEndpoint, in time order

    @property
    def t0(self) -> float:
        return self.record["started_at"] or 0.0


def ids_of(worker: str) -> Dict[str, List[str]]:
    return {"warmup": ["%s-w%d" % (worker, k) for k in range(WARMUPS)],
            "main": ["%s-%d" % (worker, k) for k in range(DELIVERIES)]}


class Sampler(threading.Thread):
    """GetEndpoint(key) on staggerd every SAMPLE_INTERVAL until stop()."""

    def __init__(self, target: str, key: str) -> None:
        super().__init__(daemon=True)
        self.samples: List[Dict[str, Any]] = []
        self._channel = grpc.insecure_channel(target)
        self._stub = rpc.RetryCoordinatorStub(self._channel)
        self._key = key
        self._done = threading.Event()

    def run(self) -> None:
        while not self._done.wait(SAMPLE_INTERVAL):
            try:
                s = self._stub.GetEndpoint(
                    pb.GetEndpointRequest(endpoint=self._key),
                    timeout=5).state
            except grpc.RpcError:
                continue  # NOT_FOUND until the first call; a slow answer
            p = s.release_pace
            self.samples.append({
                "t": time.time(), "per_second": p.per_second,
                "releasing": p.releasing, "phase": pb.PacePhase.Name(p.phase),
                "learned_from": pb.PaceSource.Name(p.learned_from),
                "backlog": p.backlog,
                "breaker": pb.BreakerState.Name(s.breaker_state),
                "retry_after_until": (
                    s.retry_after_until.ToNanoseconds() / 1e9
                    if s.HasField("retry_after_until") else None)})

    def stop(self) -> List[Dict[str, Any]]:
        self._done.set()
        self.join(timeout=30)
        self._channel.close()
        return list(self.samples)


class Worker:
    """A worker process: stderr echoed with its name, result in `out`."""

    def __init__(self, name: str, argv: List[str], out: str) -> None:
        self.name, self.out = name, out
        self.p = subprocess.Popen(argv, stderr=subprocess.PIPE, text=True,
                                  preexec_fn=_die_with_parent)
        threading.Thread(target=self._echo, daemon=True).start()

    def _echo(self) -> None:
        for line in self.p.stderr:
            sys.stderr.write("[%s] %s" % (self.name, line))

    def finish(self, deadline: float) -> Optional[int]:
        """Its exit code, or None if it had to be killed at `deadline`
        (time.monotonic())."""
        try:
            return self.p.wait(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            self.kill()
            return None

    def kill(self) -> None:
        if self.p.poll() is None:
            self.p.kill()
            self.p.wait(timeout=30)

    def result(self) -> Dict[str, Any]:
        try:
            with open(self.out, encoding="utf-8") as f:
                return json.load(f)
        except (OSError, ValueError):
            return {}


def run(b: Binaries, log: Callable[..., None] = print) -> Run:
    """Starts everything, lets the workers finish, stops everything."""
    work = tempfile.mkdtemp(prefix="stagger-http-e2e-")
    ids = {w: ids_of(w) for w in WORKERS}
    script = os.path.join(work, "script.json")
    with open(script, "w", encoding="utf-8") as f:
        json.dump({"before_start": 200, "phases": PHASES,
                   "hold": [i for w in WORKERS for i in ids[w]["main"]],
                   "hold_timeout": HOLD_TIMEOUT_S}, f)
    procs: List[Proc] = []
    workers: List[Worker] = []
    try:
        sd = Staggerd(b.staggerd, extra=["--config=" + CONFIG])
        procs.append(sd)
        # The agent's calls to staggerd get seconds, not 50 ms: on a loaded
        # machine a timed-out call would be decided by the agent's fallback,
        # which knows nothing of the fleet's Retry-After. Threads: waiting
        # Admits each hold one while the coordinator holds them.
        agent = Agent(b.agent, os.path.join(work, "agent.sock"), sd.target,
                      extra=["--config=" + CONFIG, "--call_deadline=5s",
                             "--threads=128"])
        procs.append(agent)
        receiver = Proc([b.python, os.path.join(HERE, "receiver.py"),
                         "--script", script],
                        r"listening on 127\.0\.0\.1:(\d+)", "receiver")
        procs.append(receiver)
        url = "http://127.0.0.1:%s/hooks/%s" % (receiver.ready_match.group(1),
                                                TOKEN)
        key = endpoint_key_from_url(url, path_segments=1)
        log("receiver at %s; endpoint key %s" % (url, key))
        sampler = Sampler(sd.target, key)
        sampler.start()
        argv = {"cpp": [b.cpp_worker],
                "py": [b.python, os.path.join(EXAMPLES, "python",
                                                  "http_worker.py")],
                "ts": [b.node, b.js_worker],
                "go": [b.go_worker]}
        for w in WORKERS:
            out = os.path.join(work, w + ".json")
            workers.append(Worker(w, argv[w] + [
                "--target=" + agent.target, "--url=" + url, "--name=" + w,
                "--warmup_ids=" + ",".join(ids[w]["warmup"]),
                "--ids=" + ",".join(ids[w]["main"]),
                "--deadline_s=%d" % DEADLINE_S,
                "--attempt_timeout_s=%d" % ATTEMPT_TIMEOUT_S,
                "--out=" + out], out))
        deadline = time.monotonic() + WORKER_TIMEOUT
        exit_codes = {w.name: w.finish(deadline) for w in workers}
        samples = sampler.stop()
        with urllib.request.urlopen(
                "http://127.0.0.1:%s/record" % receiver.ready_match.group(1),
                timeout=30) as r:
            record = json.load(r)
        return Run(key, {w: ids[w]["warmup"] + ids[w]["main"]
                         for w in WORKERS},
                   record, {w.name: w.result() for w in workers}, exit_codes,
                   samples)
    finally:
        for w in workers:
            w.kill()  # only if the run failed before they ended
        for p in reversed(procs):
            p.stop()


# --- what it showed ---------------------------------------------------------


def evaluate(r: Run) -> Tuple[Dict[str, List[str]], List[str]]:
    """The checks (checks.py) on a run: {what: problems} (all empty: it
    holds), and a summary of what was measured, for a person."""
    problems: Dict[str, List[str]] = {}
    problems["every worker finished"] = [
        "%s exited %s" % (w, "(killed: timed out)" if c is None else c)
        for w, c in sorted(r.exit_codes.items()) if c != 0]
    problems["one endpoint key, from the URL"] = [
        "%s used %r" % (w, r.workers[w].get("endpoint_key"))
        for w in WORKERS if r.workers[w].get("endpoint_key") != r.key]
    if TOKEN in r.key:
        problems["one endpoint key, from the URL"].append("the token is in it")
    problems["every delivery acknowledged exactly once"] = checks.exactly_once(
        [i for w in WORKERS for i in r.ids[w]], r.record)
    problems["nothing given up"] = checks.nothing_given_up(r.workers) + [
        "%s reported deliveries %s, not %s" % (w, got, r.ids[w])
        for w in WORKERS
        for got in [[d.get("id") for d in r.workers[w].get("deliveries", [])]]
        if got != r.ids[w]]
    problems["each attempt reached the receiver once"] = checks.attempts_match(
        r.workers, r.record)
    windows, unreported = checks.retry_after_windows(r.workers, r.record)
    problems["no request inside a Retry-After window"] = (
        unreported + checks.retry_after_violations(r.workers, r.record,
                                                   windows))
    held = checks.held_by_others(r.workers, windows)
    problems["a Retry-After honoured across languages"] = (
        checks.honoured_across(WORKERS, held))
    buckets = checks.pace_buckets(r.workers, r.record, r.samples)
    paced_back = checks.held_by_pace(r.workers)
    problems["the release within the learned pace"] = checks.pace_problems(
        buckets, paced_back, min_paced=len(WORKERS) * DELIVERIES // 3)

    statuses: Dict[int, int] = {}
    for q in r.record["requests"]:
        statuses[q["status"]] = statuses.get(q["status"], 0) + 1
    lines = ["%d deliveries (%d per worker, %d of them warm-ups); %d requests "
             "answered: %s" % (
                 sum(len(v) for v in r.ids.values()), WARMUPS + DELIVERIES,
                 WARMUPS, len(r.record["requests"]),
                 ", ".join("%d x %d" % (n, s)
                           for s, n in sorted(statuses.items())))]
    for w in WORKERS:
        ends: Dict[str, int] = {}
        for d in r.workers[w].get("deliveries", []):
            ends[d.get("end")] = ends.get(d.get("end"), 0) + 1
        lines.append("  %-3s %s" % (w, ", ".join(
            "%s %d" % kv for kv in sorted(ends.items())) or "no result"))
    burst = {(q["id"], q["attempt"]) for q in r.record["requests"]
             if q["held"]}
    after = sorted((w for w in windows if (w.id, w.attempt) not in burst),
                   key=lambda w: w.sent)
    lines.append("Retry-After: %d responses carried one, %d of them to the "
                 "held burst; the first after the burst: %s" % (
                     len(windows), len(windows) - len(after),
                     "%s %s #%d at %+.3fs" % (
                         after[0].worker, after[0].id, after[0].attempt,
                         after[0].sent - r.t0) if after else "none"))
    lines.append("told to wait for a Retry-After another worker received "
                 "(received by -> held): %s" % ", ".join(
                     "%s->%s %d" % (x, l, n)
                     for (x, l), n in sorted(held.items())))
    lines.append("seconds while the release ran (arrivals: paced + "
                 "probes; the highest pace sampled; the bound); %d admits "
                 "held back by it (DEFER(PACED), PROCEED(RELEASED)):"
                 % paced_back)
    lines += pace_table(r, buckets)
    lines.append("%d GetEndpoint samples" % len(r.samples))
    return problems, lines


# --- for a person -----------------------------------------------------------


def _event_line(e: Dict[str, Any]) -> str:
    what = "%s #%d" % (e["call"], e["attempt"])
    if e["call"] == "report":
        what += " %s" % e.get("outcome")
        if "retry_after" in e:
            what += " (Retry-After %gs)" % e["retry_after"]
    elif e.get("wait"):
        what += " (wait %.2fs)" % e["wait"]
    if "error" in e:
        return "%s -> error %s" % (what, e["error"])
    verdict = "%s %s" % (e["verdict"], e["reason"])
    if e["verdict"] == "PROCEED" and e["delay"]:
        verdict += " in %.2fs" % e["delay"]
    if e["verdict"] == "DEFER":
        verdict += " for %.2fs" % e["defer_for"]
    if e["source"] != "coordinator":
        verdict += " [%s]" % e["source"]
    return "%s -> %s" % (what, verdict)


def timeline(r: Run) -> List[str]:
    """Every request the receiver answered, every answer each worker had
    from the coordinator, the receiver's phases and what staggerd's
    GetEndpoint showed when it changed (breaker, release pace), in time
    order, as seconds since the script's start (negative: the warm-up and
    the burst before it)."""
    rows = []
    for q in r.record["requests"]:
        ra = ("" if q["retry_after"] is None else
              " Retry-After: %d" % q["retry_after"])
        rows.append((q["answered"], "%-9s %-7s #%d answered %d%s%s" % (
            "receiver", q["id"], q["attempt"], q["status"], ra,
            " (held)" if q["held"] else "")))
    for name, w in sorted(r.workers.items()):
        for d in w.get("deliveries", []):
            for e in d.get("events", []):
                rows.append((e["answered"], "%-9s %-7s %s" % (
                    name, d["id"], _event_line(e))))
    if r.record["started_at"] is not None:
        for p in PHASES:
            rows.append((r.t0 + p["at"], "%-9s --- from now: %d%s%s ---" % (
                "receiver", p["status"],
                " with Retry-After: %d" % p["retry_after"]
                if "retry_after" in p else "",
                ", answered after %gs" % p["delay"] if "delay" in p else "")))
    seen = None
    for s in r.samples:
        now = (s["breaker"], s["phase"], s["releasing"])
        if now != seen:
            rows.append((s["t"], "%-9s breaker %s, pace %.1f/s (%s, %s)%s" % (
                "staggerd", s["breaker"], s["per_second"],
                s["phase"].replace("PACE_", ""),
                s["learned_from"].replace("PACE_", ""),
                ", releasing" if s["releasing"] else "")))
            seen = now
    rows.sort(key=lambda row: row[0])
    return ["%+8.3fs  %s" % (t - r.t0, text) for t, text in rows]


def pace_table(r: Run, buckets: List[checks.Bucket]) -> List[str]:
    return ["  [%+5.1fs, %+5.1fs)  %3d + %d   pace %7.1f/s   bound %7.1f%s" % (
        b.start - r.t0, b.start + 1 - r.t0, b.paced, b.probes, b.pace,
        b.bound, "   OVER" if b.paced > b.bound else "") for b in buckets]
