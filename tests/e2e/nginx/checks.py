"""What a run against the nginx limiter must show, as pure functions over
what it recorded, so that each can be shown to fail on a record made up to
break it (test_checks.py). Each check returns a list of problems (empty: it
holds).

The inputs:
  log      nginx's access log (limiter.Nginx.log): (arrival, status, body)
           per request, the body the worker's JSON {"id", "attempt",
           "worker"} (empty for a request nginx refused before reading it)
  workers  {name: the worker's JSON (examples/cpp/http_worker.cc)}: per
           delivery its end and reason
  recovered_at  when the outage ended (the down file removed), Unix s
"""

import json
import math
from typing import Any, Dict, Iterable, List, Optional, Tuple

Request = Tuple[float, int, str]
Workers = Dict[str, Dict[str, Any]]


def delivered(log: Iterable[Request]) -> Dict[str, int]:
    """{delivery id: how many times nginx answered it 200}."""
    out: Dict[str, int] = {}
    for _, status, body in log:
        if status == 200:
            i = json.loads(body)["id"]
            out[i] = out.get(i, 0) + 1
    return out


def exactly_once(expected_ids: Iterable[str],
                 log: Iterable[Request]) -> List[str]:
    """Every expected delivery answered 200 exactly once, nothing else."""
    acks = delivered(log)
    expected = set(expected_ids)
    problems = ["%s delivered %d times" % (i, acks.get(i, 0))
                for i in sorted(expected) if acks.get(i, 0) != 1]
    unexpected = sorted(set(acks) - expected)
    if unexpected:
        problems.append("delivered but never sent: %s" % unexpected)
    return problems


def nothing_given_up(workers: Workers, expected: Dict[str, List[str]]
                     ) -> List[str]:
    """Every worker reported every one of its deliveries SUCCEEDED."""
    problems = []
    for name, ids in sorted(expected.items()):
        got = {d.get("id"): d for d in workers.get(name, {}).get(
            "deliveries", [])}
        for i in ids:
            d = got.get(i)
            if d is None:
                problems.append("%s: %s not reported" % (name, i))
            elif d.get("end") != "SUCCEEDED":
                problems.append("%s: %s ended %s (%s)" % (
                    name, i, d.get("end"), d.get("reason") or d.get("error")))
    return problems


def over_capacity(log: Iterable[Request]) -> int:
    """Answers the limiter refused (429)."""
    return sum(1 for _, status, _ in log if status == 429)


def within(count: int, deliveries: int, share: float) -> List[str]:
    """count <= share x deliveries."""
    if count <= share * deliveries:
        return []
    return ["%d over-capacity answers (429) for %d deliveries: more than "
            "%.0f%% (%.0f)" % (count, deliveries, share * 100,
                               share * deliveries)]


def recovery(log: List[Request], recovered_at: float, deliveries: int,
             share: float) -> Optional[float]:
    """Seconds from the recovery until `share` of the deliveries had been
    answered 200 (none: never)."""
    need = math.ceil(share * deliveries)
    times = sorted(t for t, status, _ in log if status == 200)
    if need < 1 or len(times) < need:
        return None
    return max(0.0, times[need - 1] - recovered_at)


def per_second(log: Iterable[Request], recovered_at: float
               ) -> List[Tuple[int, int, int]]:
    """[(second after the recovery, 200s, 429s)], from the recovery's second
    to the last request's."""
    counts: Dict[int, List[int]] = {}
    for t, status, _ in log:
        if t < recovered_at:
            continue
        c = counts.setdefault(int(t - recovered_at), [0, 0])
        if status == 200:
            c[0] += 1
        elif status == 429:
            c[1] += 1
    if not counts:
        return []
    return [(s, *counts.get(s, [0, 0])) for s in range(max(counts) + 1)]
