"""What the HTTP end-to-end run must show, as pure functions over what it
recorded, so that each can be shown to fail on a record made up to break
it (test_checks.py). Each returns a list of problems (empty: it holds) or
the figures the timeline prints.

The inputs (scenario.Run):
  record   the receiver's (receiver.py): every request with its arrival
           and answer times, status and Retry-After; acks; duplicates
  workers  {name: the worker's JSON (examples/cpp/http_worker.cc)}: per delivery its end and
           every Admit / Report it made: when it asked, when the answer
           came, the wait it asked for, verdict, reason, source
  samples  GetEndpoint on staggerd while the run went: time,
           release_pace.per_second, releasing, breaker, ...
All times are Unix seconds on this machine's one clock (the receiver, the
workers and the sampler read the same CLOCK_REALTIME).
"""

import dataclasses
from typing import Any, Dict, Iterable, List, Tuple

Record = Dict[str, Any]
Workers = Dict[str, Dict[str, Any]]

# --- exactly once, nothing given up ----------------------------------------


def exactly_once(expected_ids: Iterable[str], record: Record) -> List[str]:
    """Every expected delivery acknowledged (answered 200) exactly once,
    nothing else acknowledged, every request readable, the hold met."""
    expected = set(expected_ids)
    problems = []
    if record["hold_timed_out"]:
        problems.append("the receiver's hold timed out; never came: %s"
                        % record["missing_from_hold"])
    if record["duplicates"]:
        problems.append("acknowledged twice (duplicates): %s"
                        % sorted(record["duplicates"]))
    acks = record["acks"]
    for i in sorted(expected):
        if acks.get(i, 0) != 1:
            problems.append("%s acknowledged %d times" % (i, acks.get(i, 0)))
    unexpected = sorted(set(acks) - expected)
    if unexpected:
        problems.append("acknowledged but never sent: %s" % unexpected)
    if record["malformed"]:
        problems.append("malformed requests: %s" % record["malformed"][:5])
    return problems


def nothing_given_up(workers: Workers) -> List[str]:
    """Every delivery SUCCEEDED, and no call was answered GIVE_UP."""
    problems = []
    for name, w in sorted(workers.items()):
        for d in w.get("deliveries", []):
            if d.get("end") != "SUCCEEDED":
                problems.append("%s %s ended %s (%s)" % (
                    name, d.get("id"), d.get("end"),
                    d.get("reason") or d.get("error")))
            for e in d.get("events", []):
                if e.get("verdict") == "GIVE_UP":
                    problems.append("%s %s: %s #%d answered GIVE_UP(%s)" % (
                        name, d["id"], e["call"], e["attempt"], e["reason"]))
    return problems


def attempts_match(workers: Workers, record: Record) -> List[str]:
    """The attempts each worker sent (one Report each) are the requests
    the receiver got for that delivery: none lost, none sent twice."""
    got: Dict[str, List[int]] = {}
    for q in record["requests"]:
        got.setdefault(q["id"], []).append(q["attempt"])
    problems = []
    for name, w in sorted(workers.items()):
        for d in w.get("deliveries", []):
            sent = sorted(e["attempt"] for e in d.get("events", [])
                          if e["call"] == "report")
            if sorted(got.get(d["id"], [])) != sent:
                problems.append("%s %s: reported attempts %s, receiver got %s"
                                % (name, d["id"], sent,
                                   sorted(got.get(d["id"], []))))
    return problems


# --- Retry-After ----------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Window:
    """One response with a Retry-After: answered at `sent` (receiver time)
    to attempt `attempt` of delivery `id` of worker `worker`, for `seconds`;
    `known` is when that worker had the coordinator's answer to its Report
    of it -- by then the coordinator had learned the window. It learned it
    at some instant p in [sent, known], and holds retries until p +
    seconds."""
    worker: str
    id: str
    attempt: int
    sent: float
    seconds: float
    known: float

    def holds_arrival(self, t: float) -> bool:
        """The endpoint asked for no request at `t`."""
        return self.sent <= t < self.sent + self.seconds

    def in_force(self, t: float) -> bool:
        """The coordinator may have held a call at `t` for this window."""
        return self.sent <= t < self.known + self.seconds


def _deliveries(workers: Workers):
    for name, w in sorted(workers.items()):
        for d in w.get("deliveries", []):
            yield name, d


def admissions(workers: Workers) -> Dict[Tuple[str, int], Dict[str, Any]]:
    """(delivery id, attempt) -> the Admit event that let that attempt go:
    the last PROCEED to an Admit of it before its Report."""
    out = {}
    for _, d in _deliveries(workers):
        for e in d.get("events", []):
            if e["call"] == "admit" and e.get("verdict") == "PROCEED":
                out[(d["id"], e["attempt"])] = e
    return out


def decided_at(call: Dict[str, Any]) -> float:
    """When the coordinator decided a call, by the worker's record: when it
    was asked (it answers at once; the call's transit is all that is
    between), or for a waiting Admit (wait > 0), which the coordinator may
    hold and decide when it lets it go, when the answer came."""
    return call["answered"] if call.get("wait", 0) > 0 else call["asked"]


def retry_after_windows(workers: Workers,
                        record: Record) -> Tuple[List[Window], List[str]]:
    """Every response that carried a Retry-After, as a Window."""
    known: Dict[Tuple[str, int], float] = {}
    for _, d in _deliveries(workers):
        for e in d.get("events", []):
            if e["call"] == "report":
                known[(d["id"], e["attempt"])] = e["answered"]
    windows, problems = [], []
    for q in record["requests"]:
        if q["retry_after"] is None:
            continue
        k = known.get((q["id"], q["attempt"]))
        if k is None:
            problems.append("%s #%d got Retry-After but was never reported"
                            % (q["id"], q["attempt"]))
            continue
        windows.append(Window(q["worker"], q["id"], q["attempt"],
                              q["answered"], q["retry_after"], k))
    return windows, problems


def retry_after_violations(workers: Workers, record: Record,
                           windows: List[Window]) -> List[str]:
    """No request arrives inside a Retry-After window unless it was in
    flight when the coordinator learned the window: a request violates
    window w if it arrived in [w.sent, w.sent + w.seconds) and the Admit
    that let it go was decided at or after w.known (decided_at: asked then;
    a waiting Admit, answered then). Such an Admit was decided by a
    coordinator that knew w, so it should have been held. Every request
    must have an Admit that let it go. (A waiting Admit that a coordinator
    holding no calls answered at once was decided a call's transit --
    milliseconds -- before its answer came.)"""
    adm = admissions(workers)
    problems = []
    for q in record["requests"]:
        a = adm.get((q["id"], q["attempt"]))
        if a is None:
            problems.append("%s #%d reached the receiver with no Admit "
                            "PROCEED for it" % (q["id"], q["attempt"]))
            continue
        for w in windows:
            if w.holds_arrival(q["arrived"]) and decided_at(a) >= w.known:
                problems.append(
                    "%s %s #%d arrived %.3fs into the %gs Retry-After window "
                    "%s #%d received, admitted (%s, %s) %.3fs after the "
                    "coordinator knew it" % (
                        q["worker"], q["id"], q["attempt"],
                        q["arrived"] - w.sent, w.seconds, w.id, w.attempt,
                        a["reason"], a["source"], decided_at(a) - w.known))
                break
    return problems


def held_by_others(workers: Workers,
                   windows: List[Window]) -> Dict[Tuple[str, str], int]:
    """(X, L) -> how often a delivery of worker L was told to wait for a
    Retry-After (an Admit answered DEFER(RETRY_AFTER_WINDOW), or a failure
    it reported without one answered PROCEED(RETRY_AFTER)) when, as the
    coordinator decided it (decided_at), a window worker X had received
    was in force and none of the delivery's own responses had a window in
    force: X's Retry-After, honoured by L."""
    out: Dict[Tuple[str, str], int] = {}
    for name, d in _deliveries(workers):
        own = [w for w in windows if w.id == d["id"]]
        for e in d.get("events", []):
            told = ((e["call"] == "admit" and e.get("verdict") == "DEFER" and
                     e.get("reason") == "RETRY_AFTER_WINDOW") or
                    (e["call"] == "report" and "retry_after" not in e and
                     e.get("reason") == "RETRY_AFTER"))
            t = decided_at(e)
            if not told or any(w.in_force(t) for w in own):
                continue
            for x in {w.worker for w in windows
                      if w.worker != name and w.in_force(t)}:
                out[(x, name)] = out.get((x, name), 0) + 1
    return out


def honoured_across(names: Iterable[str],
                    held: Dict[Tuple[str, str], int]) -> List[str]:
    """Some worker X received a Retry-After that each of the others
    honoured (held_by_others) at least once."""
    names = sorted(names)
    for x in names:
        if all(held.get((x, l), 0) > 0 for l in names if l != x):
            return []
    return ["no worker's Retry-After was honoured by all the others: held "
            "(received by, held) %s" % sorted(held.items())]


# --- the learned release pace ---------------------------------------------

# A second of arrivals may hold at most PACE_SLACK x the pace + PACE_EXTRA
# paced requests (see pace_buckets).
PACE_SLACK = 2.0
PACE_EXTRA = 2


@dataclasses.dataclass(frozen=True)
class Bucket:
    start: float           # Unix s; [start, start + 1)
    paced: int             # requests that arrived in it, probes excluded
    probes: int            # HALF_OPEN_PROBE requests that arrived in it
    pace: float            # the highest pace sampled around it (per s)

    @property
    def bound(self) -> float:
        return PACE_SLACK * self.pace + PACE_EXTRA


def pace_buckets(workers: Workers, record: Record,
                 samples: List[Dict[str, Any]]) -> List[Bucket]:
    """The receiver's arrivals in one-second buckets from its script's
    start: those seconds in which a GetEndpoint sample showed the
    endpoint's release running (release_pace.releasing: deliveries parked
    while it was down or in a Retry-After window are coming back, and every
    admission takes a slot on its queue at the learned pace). Half-open
    probes are not paced (the breaker's quota lets them go) and are
    counted apart.

    A bucket's pace is the highest release_pace.per_second sampled from
    one second before it to its end, or the first sample after it (a gap
    in the sampling). The bound on its paced arrivals, PACE_SLACK x pace +
    PACE_EXTRA, allows for the queue's GCRA, which lets at most 1 + (T +
    0.1 s) x pace admissions through in any T seconds (ReleasePacer::
    kBurst), and for arrivals lagging their admission -- a worker's thread,
    the agent or the receiver scheduled late on a loaded machine -- by up
    to 0.9 s, so that a bucket of arrivals may hold admissions from T =
    1.9 s: 1 + 2 x pace, and one for rounding."""
    start = record["started_at"]
    if start is None or not record["requests"]:
        return []
    adm = admissions(workers)
    end = max(q["arrived"] for q in record["requests"])
    buckets = []
    b = start
    while b <= end:
        if any(s["releasing"] for s in samples if b <= s["t"] < b + 1):
            arrivals = [q for q in record["requests"]
                        if b <= q["arrived"] < b + 1]
            probes = sum(1 for q in arrivals
                         if adm.get((q["id"], q["attempt"]), {}).get(
                             "reason") == "HALF_OPEN_PROBE")
            near = [s["per_second"] for s in samples
                    if b - 1 <= s["t"] <= b + 1]
            near += [s["per_second"] for s in samples if s["t"] > b + 1][:1]
            buckets.append(Bucket(b, len(arrivals) - probes, probes,
                                  max(near)))
        b += 1
    return buckets


def held_by_pace(workers: Workers) -> int:
    """Admits the release queue held back: answered DEFER(PACED), or
    waiting Admits it let go when its pace had room (PROCEED(RELEASED);
    a coordinator that holds waiting calls)."""
    return sum(1 for _, d in _deliveries(workers) for e in d.get("events", [])
               if e["call"] == "admit" and (e.get("verdict"), e.get("reason"))
               in (("DEFER", "PACED"), ("PROCEED", "RELEASED")))


def pace_problems(buckets: List[Bucket], held: int,
                  min_paced: int) -> List[str]:
    """Every bucket within its bound; and the pace was exercised: at least
    `min_paced` paced arrivals while the release ran, and at least one
    delivery held back by it (`held`, held_by_pace)."""
    problems = []
    for b in buckets:
        if b.paced > b.bound:
            problems.append("%d paced requests arrived in the second at %.3f;"
                            " the pace was %.1f/s (bound %.1f)"
                            % (b.paced, b.start, b.pace, b.bound))
    total = sum(b.paced for b in buckets)
    if total < min_paced or held == 0:
        problems.append("the pace was not exercised: %d paced requests while "
                        "the release ran (want >= %d), %d held back by it "
                        "(want >= 1)" % (total, min_paced, held))
    return problems
