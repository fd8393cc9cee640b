"""e2e.http.delivery: real HTTP deliveries by workers in three languages
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
window -- README, "Admit checks" -- which is why the script holds every
first attempt until all have arrived: after the burst, every request is a
retry.)

Honoured across languages: at least one worker X received a Retry-After
that each of the two others honoured: a delivery of theirs was told to
wait for a Retry-After (DEFER(RETRY_AFTER_WINDOW) to an Admit, or
PROCEED(RETRY_AFTER) to a failure it reported without one) while a window
X had received was in force ([sent, known + R)) and none of that
delivery's own responses had one in force.

The release within the learned pace: from the receiver's first 200 after
the bad period until the sampled release_pace.releasing turns false, the
paced requests (half-open probes apart) that arrive in each second are at
most 1.5 x the pace + 2, the pace being the highest
release_pace.per_second that staggerd's GetEndpoint showed (sampled every
50 ms) from one second before that second to two after it. The slack is
for the queue's 100 ms burst tolerance, arrivals lagging their admission
on a loaded machine, and sampling (checks.pace_buckets says why each);
an unpaced release of the parked backlog (tens of deliveries at once)
exceeds it. And at least a third of the deliveries must come back during
the release, or the check would show nothing.

No timing bound is asserted: on a slow machine the run takes longer, and
every wait is a poll or a process's own end with a generous limit.
"""

import json
import sys

import scenario


def log(*args):
    print(*args, file=sys.stderr, flush=True)


def test_http_deliveries_in_three_languages_through_one_agent():
    run = scenario.run(scenario.Binaries.from_env(), log=log)
    problems, summary = scenario.evaluate(run)
    failed = {what: p for what, p in problems.items() if p}
    log("\n".join(summary))
    if failed:
        log("\n".join(scenario.timeline(run)))
    assert not failed, json.dumps(failed, indent=1)
