"""e2e.http.delivery: real HTTP deliveries by workers in four languages
through one stagger-agent in front of one staggerd (scenario.py has the
set-up and the receiver's script). What it holds, and exactly how
(checks.py):

Every delivery arrives and is acknowledged exactly once: the receiver
answered 200 to each delivery id once; an id answered 200 twice is a
duplicate and fails the test, as does an id acknowledged that no worker
sent. Each worker's attempts (one Report each) are exactly the requests
the receiver got for that delivery.

Nothing is given up while time is left: every delivery's deadline is 300 s
and the receiver is bad for 13 s; every delivery must end SUCCEEDED and no
call may be answered GIVE_UP.

A Retry-After is honoured, fleet-wide. Every response that carried
"Retry-After: R" opens a window [sent, sent + R) on the receiver's clock,
`sent` being when the receiver answered it. The coordinator learns the
window when the worker that received it reports it: at some instant in
[sent, known], `known` being when that worker had the coordinator's answer
to that Report. A request is "in flight" for a window when the Admit that
let it go could have been decided before the coordinator knew the window:
it was asked before `known` (a waiting Admit, which the coordinator may
hold and decide when it answers: answered before `known`). Assertion: no
request arrives inside a window unless it was in flight for it. That
covers the held burst (every first attempt arrived before the first
Retry-After was sent) and every later window. (Only retries are held to a
window -- core/engine/decision_path.h, the Admit gates -- which is why the
script holds every first attempt until all have arrived: after the burst,
every request is a retry.)

Honoured across languages: at least one worker X received a Retry-After
that each of the two others honoured: a delivery of theirs was told to
wait for a Retry-After (DEFER(RETRY_AFTER_WINDOW) to an Admit, or
PROCEED(RETRY_AFTER) to a failure it reported without one) while a window
X had received was in force ([sent, known + R)) and none of that
delivery's own responses had one in force.

The release within the learned pace: in every second (of the receiver's
arrivals, from its script's start) in which staggerd's GetEndpoint,
sampled every 50 ms, showed the endpoint's release running
(release_pace.releasing: parked deliveries coming back, every admission
taking a slot at the pace), the requests that arrived, half-open probes
apart (the breaker's quota lets them go), number at most 2 x the pace + 2;
the pace being the highest release_pace.per_second sampled from one second
before that second to its end (or the first sample after it). The slack:
the queue's GCRA lets 1 + (T + 0.1 s) x pace admissions through in any T
seconds, and an arrival may lag its admission (a worker, the agent or the
receiver scheduled late on a loaded machine) by up to 0.9 s, so one
second of arrivals holds admissions from at most 1.9 s. The run releases
at the learned pace twice: after the Retry-After windows, at 10/s into the
429s (where it binds: an unpaced return of the thirty-odd parked
deliveries within a second would exceed 22), and after recovery, where the
pace grows with every success. And the pace must have been exercised: at
least 12 requests (a third of the deliveries) arrived while the release
ran, and at least one Admit was held back by it (answered DEFER(PACED), or
a waiting Admit answered PROCEED(RELEASED)).

No timing bound is asserted: on a slow machine the run takes longer, and
every wait is a poll or a process's own end with a generous limit.
"""

import json
import sys

import scenario


def log(*args):
    print(*args, file=sys.stderr, flush=True)


def test_http_deliveries_in_four_languages_through_one_agent():
    run = scenario.run(scenario.Binaries.from_env(), log=log)
    problems, summary = scenario.evaluate(run)
    failed = {what: p for what, p in problems.items() if p}
    log("\n".join(summary))
    if failed:
        log("\n".join(scenario.timeline(run)))
    assert not failed, json.dumps(failed, indent=1)
