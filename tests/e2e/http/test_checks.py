"""e2e.http.checks: the HTTP end-to-end run's checks (checks.py) and its
receiver (receiver.py) on made-up records and a fake clock: each check
passes a record that holds and fails the one made to break it, so that
e2e.http.delivery cannot pass by checking nothing."""

import json
import threading
import urllib.error
import urllib.request

import pytest

import checks
import receiver as rx

# --- made-up records ---------------------------------------------------------


def req(t, id_, attempt, status, ra=None, worker="py", held=False):
    """A receiver record row, answered 1 ms after it arrived."""
    return {"arrived": t, "answered": t + 0.001, "id": id_,
            "attempt": attempt, "worker": worker, "status": status,
            "retry_after": ra, "held": held}


def ev(call, attempt, asked, verdict, reason, answered=None, wait=0.0,
       **extra):
    e = {"call": call, "attempt": attempt, "asked": asked,
         "answered": asked + 0.002 if answered is None else answered,
         "wait": wait, "verdict": verdict, "reason": reason,
         "source": "coordinator", "delay": 0.0, "defer_for": 0.0}
    e.update(extra)
    return e


def record(requests, started_at=0.0, **over):
    acks = {}
    for q in requests:
        if q["status"] == 200:
            acks[q["id"]] = acks.get(q["id"], 0) + 1
    r = {"started_at": started_at, "hold_timed_out": False,
         "missing_from_hold": [], "requests": requests, "acks": acks,
         "duplicates": [i for i, n in acks.items() if n > 1],
         "malformed": []}
    r.update(over)
    return r


def workers(**by_name):
    return {name: {"deliveries": ds} for name, ds in by_name.items()}


def delivery(id_, events, end="SUCCEEDED"):
    return {"id": id_, "end": end, "reason": None, "error": None,
            "events": events}


# --- exactly once, nothing given up -----------------------------------------


def test_exactly_once_passes_one_ack_each():
    r = record([req(1, "a", 1, 503), req(2, "a", 2, 200), req(2, "b", 1, 200)])
    assert checks.exactly_once(["a", "b"], r) == []


def test_exactly_once_fails_a_duplicate_a_missing_and_a_stranger():
    r = record([req(1, "a", 1, 200), req(2, "a", 2, 200), req(3, "x", 1, 200)])
    problems = checks.exactly_once(["a", "b"], r)
    assert any("duplicates" in p and "'a'" in p for p in problems)
    assert "a acknowledged 2 times" in problems
    assert "b acknowledged 0 times" in problems
    assert any("never sent" in p and "'x'" in p for p in problems)


def test_exactly_once_fails_a_hold_that_timed_out():
    r = record([], hold_timed_out=True, missing_from_hold=["c"])
    assert checks.exactly_once([], r) == [
        "the receiver's hold timed out; never came: ['c']"]


def test_nothing_given_up_fails_a_gave_up_delivery():
    w = workers(py=[delivery("a", [ev("report", 1, 1, "GIVE_UP",
                                      "ATTEMPTS_EXHAUSTED")], end="GAVE_UP")])
    problems = checks.nothing_given_up(w)
    assert len(problems) == 2 and "GAVE_UP" in problems[0]
    assert checks.nothing_given_up(workers(py=[delivery("a", [])])) == []


def test_attempts_match_fails_a_lost_and_a_repeated_attempt():
    w = workers(py=[delivery("a", [ev("report", 1, 1, "PROCEED", "BACKOFF"),
                                   ev("report", 2, 2, "DONE", "SUCCEEDED")])])
    assert checks.attempts_match(w, record([req(1, "a", 1, 503),
                                            req(2, "a", 2, 200)])) == []
    assert checks.attempts_match(w, record([req(2, "a", 2, 200)]))
    assert checks.attempts_match(w, record([req(1, "a", 1, 503),
                                            req(1.5, "a", 1, 503),
                                            req(2, "a", 2, 200)]))


# --- Retry-After -----------------------------------------------------------
# Delivery "a" (worker py) gets a 503 with Retry-After 3 at t=10; py's
# report of it is answered at t=10.1 (`known`). Delivery "b" (worker ts)
# sends attempt 2 at various times.


def ra_run(b_asked, b_arrives, wait=0.0, b_answered=None):
    w = workers(
        py=[delivery("a", [ev("admit", 1, 9.9, "PROCEED", "INITIAL_JITTER"),
                           ev("report", 1, 10.05, "PROCEED", "RETRY_AFTER",
                              answered=10.1, outcome="RATE_LIMITED",
                              retry_after=3.0)])],
        ts=[delivery("b", [ev("admit", 1, 1, "PROCEED", "INITIAL_JITTER"),
                           ev("report", 1, 2, "PROCEED", "BACKOFF"),
                           ev("admit", 2, b_asked, "PROCEED", "ADMITTED",
                              answered=b_answered, wait=wait)])])
    r = record([req(1.5, "b", 1, 500, worker="ts"),
                req(9.999, "a", 1, 503, ra=3),
                req(b_arrives, "b", 2, 200, worker="ts")])
    windows, unreported = checks.retry_after_windows(w, r)
    assert unreported == [] and len(windows) == 1
    assert (windows[0].sent, windows[0].known) == (10.0, 10.1)
    return checks.retry_after_violations(w, r, windows)


def test_a_request_asked_after_the_coordinator_knew_fails():
    problems = ra_run(b_asked=10.2, b_arrives=10.25)
    assert len(problems) == 1 and "ts b #2 arrived 0.250s into" in problems[0]


def test_a_request_in_flight_when_the_window_was_learned_passes():
    # Asked before `known`: the coordinator may have decided it first.
    assert ra_run(b_asked=10.05, b_arrives=10.3) == []


def test_a_request_after_the_window_passes():
    assert ra_run(b_asked=12.0, b_arrives=13.0) == []


def test_a_waiting_admit_counts_from_its_answer():
    # Asked while in flight, but held by the coordinator past `known`.
    assert ra_run(b_asked=10.05, b_arrives=11, wait=2.0, b_answered=10.9)
    assert ra_run(b_asked=10.05, b_arrives=10.09, wait=2.0,
                  b_answered=10.08) == []


def test_a_request_nobody_admitted_fails():
    w = workers(py=[delivery("a", [])])
    r = record([req(1, "a", 1, 200)])
    assert checks.retry_after_violations(w, r, []) == [
        "a #1 reached the receiver with no Admit PROCEED for it"]


def test_a_retry_after_response_never_reported_is_named():
    _, unreported = checks.retry_after_windows(
        workers(py=[delivery("a", [])]), record([req(1, "a", 1, 503, ra=3)]))
    assert unreported == ["a #1 got Retry-After but was never reported"]


def held_run(names_holding):
    """py receives the Retry-After at t=10 (known 10.1); every worker in
    names_holding has a delivery told DEFER(RETRY_AFTER_WINDOW) at 11."""
    w = {"py": {"deliveries": [delivery("a", [
        ev("report", 1, 10.05, "PROCEED", "RETRY_AFTER", answered=10.1,
           outcome="RATE_LIMITED", retry_after=3.0)])]}}
    for n in ("cpp", "ts"):
        held = [ev("admit", 2, 11, "DEFER", "RETRY_AFTER_WINDOW")] \
            if n in names_holding else []
        w[n] = {"deliveries": [delivery(n + "-0", held)]}
    windows, _ = checks.retry_after_windows(
        w, record([req(9.999, "a", 1, 503, ra=3)]))
    return checks.held_by_others(w, windows)


def test_honoured_across_needs_both_other_languages():
    held = held_run({"cpp", "ts"})
    assert held == {("py", "cpp"): 1, ("py", "ts"): 1}
    assert checks.honoured_across(["cpp", "py", "ts"], held) == []
    assert checks.honoured_across(["cpp", "py", "ts"], held_run({"cpp"}))


def test_a_waiting_admit_is_attributed_when_it_was_answered():
    # ts-0's own window runs to 3.1; asked at 3, held, answered DEFER at 11
    # under py's window (10..13.1).
    w = workers(
        py=[delivery("a", [ev("report", 1, 10.05, "PROCEED", "RETRY_AFTER",
                              answered=10.1, outcome="RATE_LIMITED",
                              retry_after=3.0)])],
        ts=[delivery("ts-0", [
            ev("report", 1, 0.05, "PROCEED", "RETRY_AFTER", answered=0.1,
               outcome="RATE_LIMITED", retry_after=3.0),
            ev("admit", 2, 3.0, "DEFER", "RETRY_AFTER_WINDOW", answered=11,
               wait=3.5)])])
    windows, _ = checks.retry_after_windows(w, record([
        req(0, "ts-0", 1, 503, ra=3, worker="ts"),
        req(9.999, "a", 1, 503, ra=3)]))
    assert checks.held_by_others(w, windows) == {("py", "ts"): 1}


def test_a_delivery_held_by_its_own_retry_after_is_not_counted():
    w = workers(py=[delivery("a", [
        ev("report", 1, 10.05, "PROCEED", "RETRY_AFTER", answered=10.1,
           outcome="RATE_LIMITED", retry_after=3.0),
        ev("admit", 2, 11, "DEFER", "RETRY_AFTER_WINDOW")])],
        ts=[delivery("b", [ev("report", 1, 10.05, "PROCEED", "RETRY_AFTER",
                              answered=10.1, outcome="RATE_LIMITED",
                              retry_after=3.0)])])
    windows, _ = checks.retry_after_windows(
        w, record([req(9.999, "a", 1, 503, ra=3),
                   req(9.999, "b", 1, 503, ra=3, worker="ts")]))
    assert checks.held_by_others(w, windows) == {}


# --- the learned release pace ----------------------------------------------


def pace_run(arrival_times, pace, probes=0, paced_defers=1):
    """The script started at 0; the release runs from 20 to 23 at `pace`
    (sampled every 50 ms from 15 to 26); `probes` HALF_OPEN_PROBE arrivals
    at 20.5; paced arrivals at `arrival_times`; `paced_defers` deliveries
    told DEFER(PACED) once."""
    requests, ds = [], []
    for k in range(probes):
        requests.append(req(20.5, "p%d" % k, 2, 200))
        ds.append(delivery("p%d" % k, [ev("admit", 2, 20.4, "PROCEED",
                                          "HALF_OPEN_PROBE")]))
    for k, t in enumerate(arrival_times):
        requests.append(req(t, "d%d" % k, 2, 200))
        held = [ev("admit", 2, t - 0.5, "DEFER", "PACED")] \
            if k < paced_defers else []
        ds.append(delivery("d%d" % k, held + [
            ev("admit", 2, t - 0.01, "PROCEED", "ADMITTED")]))
    samples = [{"t": 15 + 0.05 * k, "per_second": pace,
                "releasing": 20 <= 15 + 0.05 * k < 23} for k in range(220)]
    return checks.pace_buckets(workers(py=ds), record(requests, 0.0),
                               samples), checks.held_by_pace(workers(py=ds))


def test_a_release_at_the_pace_passes():
    buckets, held = pace_run([20.05 + k / 10 for k in range(30)], pace=10,
                             probes=5)
    assert [(b.start, b.paced, b.probes, b.pace) for b in buckets] == [
        (20, 10, 5, 10), (21, 10, 0, 10), (22, 10, 0, 10)]
    assert held == 1
    assert checks.pace_problems(buckets, held, min_paced=10) == []


def test_an_unpaced_release_fails():
    buckets, held = pace_run([20.2 + k / 100 for k in range(30)], pace=10)
    assert checks.pace_problems(buckets, held, min_paced=10) == [
        "30 paced requests arrived in the second at 20.000; the pace was "
        "10.0/s (bound 22.0)"]


def test_a_release_that_held_nothing_back_or_brought_nothing_fails():
    buckets, held = pace_run([20.05 + k / 10 for k in range(30)], pace=10,
                             paced_defers=0)
    assert checks.pace_problems(buckets, held, min_paced=10) == [
        "the pace was not exercised: 30 paced requests while the release "
        "ran (want >= 10), 0 held back by it (want >= 1)"]
    buckets, held = pace_run([20.5], pace=10)
    assert checks.pace_problems(buckets, held, min_paced=10)


def test_a_waiting_admit_released_by_the_pace_counts_as_held():
    w = workers(py=[delivery("a", [
        ev("admit", 2, 1, "PROCEED", "RELEASED", answered=2, wait=1.5)])])
    assert checks.held_by_pace(w) == 1


def test_seconds_without_a_release_are_not_bounded():
    # 30 at once before the release and after it: not the queue's doing.
    buckets, _ = pace_run([10.5] * 30 + [24.5] * 30, pace=10)
    assert [(b.start, b.paced) for b in buckets] == [(20, 0), (21, 0),
                                                     (22, 0)]


# --- the receiver ------------------------------------------------------------


@pytest.mark.parametrize("doc, error", [
    ([], "script: expected a JSON object"),
    ({"phases": []}, "phases: expected a non-empty list"),
    ({"phases": [{"at": 1, "status": 200}]}, "phases[0].at: must be 0"),
    ({"phases": [{"at": 0, "status": 200}, {"at": 0, "status": 503}]},
     "phases[1].at: must be after phases[0].at"),
    ({"phases": [{"at": 0, "status": 99}]},
     "phases[0].status: expected an HTTP status 100..599, got 99"),
    ({"phases": [{"at": 0, "status": 503, "retry_after": 1.5}]},
     "phases[0].retry_after: expected whole seconds >= 0, got 1.5"),
    ({"phases": [{"at": 0, "status": 200, "delay": -1}]},
     "phases[0].delay: expected seconds in [0, 60], got -1"),
    ({"phases": [{"at": 0, "status": 200}], "hold": ["a", "a"]},
     "hold: ids repeat"),
    ({"phases": [{"at": 0, "status": 200}], "hold_timeout": 0},
     "hold_timeout: expected seconds > 0, got 0"),
    ({"phases": [{"at": 0, "status": 200}], "phse": 1},
     "script: unknown field(s) ['phse']"),
])
def test_a_bad_script_names_its_field(doc, error):
    with pytest.raises(rx.ScriptError) as e:
        rx.Script.parse(doc)
    assert str(e.value) == error


class FakeClock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def body(id_, attempt=1):
    return json.dumps({"id": id_, "attempt": attempt, "worker": "t"}).encode()


def test_phases_by_time_since_start_and_duplicates():
    clock = FakeClock()
    r = rx.Receiver(rx.Script.parse({"phases": [
        {"at": 0, "status": 503, "retry_after": 3},
        {"at": 5, "status": 429}, {"at": 9, "status": 200}]}), clock)
    assert r.answer(body("a")) == rx.Phase(0, 503, 3)
    clock.now += 5
    assert r.answer(body("a", 2)).status == 429
    clock.now += 4
    assert r.answer(body("a", 3)).status == 200
    assert r.answer(body("a", 4)).status == 200
    rec = r.record()
    assert rec["acks"] == {"a": 2} and rec["duplicates"] == ["a"]
    assert [q["status"] for q in rec["requests"]] == [503, 429, 200, 200]
    assert r.answer(b"{}").status == 400
    assert r.record()["malformed"] == ["{}"]


def test_a_phase_delay_is_waited_before_the_answer():
    clock = FakeClock()

    def sleep(seconds):
        clock.now += seconds
    r = rx.Receiver(rx.Script.parse({"phases": [
        {"at": 0, "status": 200, "delay": 0.25}]}), clock, sleep)
    assert r.answer(body("a")) == rx.Phase(0, 200, None, 0.25)
    q = r.record()["requests"][0]
    assert (q["arrived"], q["answered"]) == (1000, 1000.25)


def test_the_hold_answers_the_burst_together_by_the_first_phase():
    clock = FakeClock()
    r = rx.Receiver(rx.Script.parse({
        "before_start": 200, "hold": ["a", "b"],
        "phases": [{"at": 0, "status": 503, "retry_after": 3},
                   {"at": 1, "status": 200}]}), clock)
    assert r.answer(body("warm")).status == 200  # before the start
    answers = {}
    t = threading.Thread(target=lambda: answers.update(a=r.answer(body("a"))))
    t.start()
    clock.now += 60  # "a" waits however long "b" takes
    answers["b"] = r.answer(body("b"))
    t.join(timeout=30)
    assert answers == {"a": rx.Phase(0, 503, 3), "b": rx.Phase(0, 503, 3)}
    rec = r.record()
    assert rec["started_at"] == 1060 and not rec["hold_timed_out"]
    assert [q["held"] for q in rec["requests"]] == [False, True, True]


def test_a_hold_never_met_starts_the_script_and_says_so():
    r = rx.Receiver(rx.Script.parse({
        "hold": ["a", "never"], "hold_timeout": 0.01,
        "phases": [{"at": 0, "status": 200}]}))
    r.start_after_timeout()
    assert r.answer(body("a")).status == 200
    rec = r.record()
    assert rec["hold_timed_out"] and rec["missing_from_hold"] == ["a",
                                                                   "never"]


def test_the_server_answers_http_with_retry_after_and_its_record():
    r = rx.Receiver(rx.Script.parse({"phases": [
        {"at": 0, "status": 503, "retry_after": 7}]}))
    server = rx.Server(("127.0.0.1", 0), rx.make_handler(r))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = "http://127.0.0.1:%d" % server.server_address[1]
    try:
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(base + "/hooks/x", data=body("a"),
                                    timeout=30)
        assert e.value.code == 503
        assert e.value.headers["Retry-After"] == "7"
        with urllib.request.urlopen(base + "/record", timeout=30) as resp:
            rec = json.load(resp)
        assert [(q["id"], q["status"], q["retry_after"])
                for q in rec["requests"]] == [("a", 503, 7)]
    finally:
        server.shutdown()
        server.server_close()
