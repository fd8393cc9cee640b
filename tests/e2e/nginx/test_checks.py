"""e2e.nginx.checks: the limiter run's checks (checks.py) and nginx's log
(limiter.py) on made-up records: each check passes a record that holds and
fails the one made to break it, so that e2e.nginx.limiter cannot pass by
checking nothing. Then nginx itself, briefly: down, up, and a 429 once its
burst is spent."""

import json
import os
import shutil
import sys
import urllib.error
import urllib.request

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import checks  # noqa: E402
import limiter  # noqa: E402


def ok(t, id_):
    return (t, 200, json.dumps({"id": id_, "attempt": 1, "worker": "py"}))


def refused(t, status=429):
    return (t, status, "")


def test_exactly_once_catches_a_missing_a_duplicate_and_a_stranger():
    log = [refused(0.5, 503), ok(1.0, "a"), refused(1.1), ok(1.2, "b")]
    assert checks.exactly_once(["a", "b"], log) == []
    assert checks.exactly_once(["a", "b", "c"], log) == ["c delivered 0 times"]
    assert checks.exactly_once(["a", "b"], log + [ok(2, "a")]) == [
        "a delivered 2 times"]
    assert checks.exactly_once(["a"], log) == [
        "delivered but never sent: ['b']"]


def test_nothing_given_up_catches_a_give_up_and_a_silence():
    workers = {"cpp": {"deliveries": [{"id": "a", "end": "SUCCEEDED"}]}}
    assert checks.nothing_given_up(workers, {"cpp": ["a"]}) == []
    gave_up = {"cpp": {"deliveries": [
        {"id": "a", "end": "GAVE_UP", "reason": "ATTEMPTS_EXHAUSTED"}]}}
    assert checks.nothing_given_up(gave_up, {"cpp": ["a"]}) == [
        "cpp: a ended GAVE_UP (ATTEMPTS_EXHAUSTED)"]
    assert checks.nothing_given_up(workers, {"cpp": ["a", "b"]}) == [
        "cpp: b not reported"]


def test_the_over_capacity_bound_counts_429s_only():
    log = [refused(0.1, 503)] * 50 + [refused(1)] * 15 + [ok(2, "a")]
    assert checks.over_capacity(log) == 15
    assert checks.within(15, 100, 0.15) == []
    assert checks.within(16, 100, 0.15) == [
        "16 over-capacity answers (429) for 100 deliveries: more than 15% "
        "(15)"]


def test_recovery_times_and_the_table_count_from_the_recovery():
    log = [refused(9.5, 503), ok(10.2, "a"), refused(10.4), ok(11.5, "b"),
           ok(12.9, "c")]
    assert checks.recovery(log, 10.0, 3, 0.5) == pytest.approx(1.5)
    assert checks.recovery(log, 10.0, 3, 1.0) == pytest.approx(2.9)
    assert checks.recovery(log, 10.0, 4, 1.0) is None  # one never came
    assert checks.per_second(log, 10.0) == [(0, 1, 1), (1, 1, 0), (2, 1, 0)]


@pytest.mark.skipif(not os.access(limiter.NGINX, os.X_OK),
                    reason="no nginx: scripts/setup installs it")
def test_nginx_is_down_then_limits_then_logs_every_body():
    def post(url, id_):
        req = urllib.request.Request(
            url, data=json.dumps({"id": id_}).encode(), method="POST")
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                return r.status
        except urllib.error.HTTPError as e:
            return e.code

    # 1/s with a burst of 2: up, the third at once is refused.
    with limiter.Nginx(rate=1, burst=2, down=True) as n:
        assert post(n.url, "d") == 503
        n.down(False)
        assert [post(n.url, "x%d" % i) for i in range(4)] == [200, 200, 200,
                                                              429]
        n.stop()
        log = n.log()
    assert [s for _, s, _ in log] == [503, 200, 200, 200, 429]
    assert [json.loads(b)["id"] for _, s, b in log if s == 200] == [
        "x0", "x1", "x2"]
    shutil.rmtree(n.work)
