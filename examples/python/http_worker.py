"""The Python worker of the HTTP end-to-end run (tests/e2e/http/scenario.py;
docs/EXAMPLE.md): real HTTP POSTs to --url through the `stagger` package,
against --target (a stagger-agent's socket, unix:/path). The same contract
as the C++ worker (http_worker.cc):

  * the endpoint key is endpoint_key_from_url(--url, path_segments=1);
  * the --warmup_ids one after another, then the --ids all at once (a
    thread each), every delivery a RetryLoop.run over one shared
    CoordinatorClient, deadline --deadline_s from its start;
  * an attempt is one POST with the body {"id", "attempt", "worker"}
    (http.client, timeout --attempt_timeout_s), mapped by
    AttemptResult.from_http (outcome_from_http_status, parse_retry_after);
    a connection that fails raises OSError, which the loop reports
    (TimeoutError as TIMEOUT, others RETRYABLE_FAILURE); an answer that is
    not HTTP is status 0 (RETRYABLE_FAILURE);
  * DEFERs are parked inside RetryLoop (park_limit is infinite).

It writes --out, the JSON http_worker.cc documents (end SUCCEEDED | GAVE_UP |
DEFERRED | CANCELLED, or ERROR with the exception).

  /usr/bin/python3 examples/python/http_worker.py --target unix:/tmp/a.sock \\
      --url http://127.0.0.1:8080/hooks/t0k3n --ids a,b --out result.json
"""

import argparse
import http.client
import json
import sys
import threading
import time
import urllib.parse
from typing import Any, Dict, List, Optional

from stagger import (Attempt, AttemptResult, Canceller, CoordinatorClient,
                     Decision, LoopOptions, Outcome, RetryLoop,
                     endpoint_key_from_url, reason_name)


class RecordingCoordinator:
    """Passes every call to the shared client and keeps an event of it
    (http_worker.cc's Event). One per delivery: its loop calls one at a time."""

    def __init__(self, inner: CoordinatorClient) -> None:
        self._inner = inner
        self.events: List[Dict[str, Any]] = []

    def admit(self, endpoint: str, attempt: int = 1, *,
              deadline: Optional[float] = None,
              first_attempt_time: Optional[float] = None,
              wait: Optional[float] = None,
              cancel: Optional[Canceller] = None) -> Decision:
        asked = time.time()
        d = self._inner.admit(endpoint, attempt, deadline=deadline,
                              first_attempt_time=first_attempt_time,
                              wait=wait, cancel=cancel)
        self._keep("admit", attempt, asked, wait or 0.0, d)
        return d

    def report(self, endpoint: str, attempt: int, outcome: Outcome, *,
               admission: int = 0, retry_after: Optional[float] = None,
               deadline: Optional[float] = None,
               first_attempt_time: Optional[float] = None) -> Decision:
        asked = time.time()
        d = self._inner.report(endpoint, attempt, outcome,
                               admission=admission, retry_after=retry_after,
                               deadline=deadline,
                               first_attempt_time=first_attempt_time)
        self._keep("report", attempt, asked, 0.0, d, outcome=outcome.name,
                   retry_after=retry_after)
        return d

    def _keep(self, call: str, attempt: int, asked: float, wait: float,
              d: Decision, **extra: Any) -> None:
        e = {"call": call, "attempt": attempt, "asked": asked,
             "answered": time.time(), "wait": wait,
             "verdict": d.verdict.name, "reason": reason_name(d.reason),
             "source": d.source.value, "delay": d.delay,
             "defer_for": d.defer_for}
        e.update({k: v for k, v in extra.items() if v is not None})
        self.events.append(e)


def post(url: urllib.parse.SplitResult, body: bytes,
         timeout: float) -> AttemptResult:
    """One attempt: POST `body`; the answer's status and Retry-After."""
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=timeout)
    try:
        conn.request("POST", url.path or "/", body,
                     {"Content-Type": "application/json",
                      "Connection": "close"})
        r = conn.getresponse()
        r.read()
        return AttemptResult.from_http(r.status, r.getheader("Retry-After"))
    except http.client.HTTPException:
        return AttemptResult.from_http(0)  # not HTTP: as no response
    finally:
        conn.close()


def deliver(client: CoordinatorClient, key: str,
            url: urllib.parse.SplitResult, name: str, delivery: str,
            args: argparse.Namespace) -> Dict[str, Any]:
    recorder = RecordingCoordinator(client)
    loop = RetryLoop(recorder, options=LoopOptions(
        deadline=time.time() + args.deadline_s,
        attempt_timeout=args.attempt_timeout_s))

    def send(attempt: Attempt) -> AttemptResult:
        body = json.dumps({"id": delivery, "attempt": attempt.number,
                           "worker": name}).encode()
        return post(url, body, attempt.timeout)

    out: Dict[str, Any] = {"id": delivery, "reason": None, "error": None}
    try:
        result = loop.run(key, send)
        out["end"] = result.end.value
        if result.reason is not None:
            out["reason"] = reason_name(result.reason)
        out["attempts"] = result.attempts_made
    except Exception as e:  # noqa: BLE001 -- reported, not hidden
        out.update(end="ERROR", error="%s: %s" % (type(e).__name__, e),
                   attempts=sum(1 for ev in recorder.events
                                if ev["call"] == "report"))
    out["events"] = recorder.events
    return out


def main(argv: List[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--target", required=True)
    ap.add_argument("--url", required=True, help="http://host:port/path")
    ap.add_argument("--name", default="python")
    ap.add_argument("--warmup_ids", default="")
    ap.add_argument("--ids", default="")
    ap.add_argument("--deadline_s", type=float, default=300)
    ap.add_argument("--attempt_timeout_s", type=float, default=60)
    ap.add_argument("--call_deadline_s", type=float, default=5)
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    url = urllib.parse.urlsplit(args.url)
    if url.scheme != "http" or not url.hostname:
        ap.error("--url: expected http://host:port/path, got %r" % args.url)
    key = endpoint_key_from_url(args.url, path_segments=1)
    client = CoordinatorClient(args.target, call_deadline=args.call_deadline_s)
    warmups = [i for i in args.warmup_ids.split(",") if i]
    ids = [i for i in args.ids.split(",") if i]
    try:
        results = [deliver(client, key, url, args.name, i, args)
                   for i in warmups]
        print("%s: %d warm-up deliveries done; %d at once"
              % (args.name, len(warmups), len(ids)), file=sys.stderr,
              flush=True)
        main_results: List[Dict[str, Any]] = [{} for _ in ids]

        def run(k: int) -> None:
            main_results[k] = deliver(client, key, url, args.name, ids[k],
                                      args)
        threads = [threading.Thread(target=run, args=(k,))
                   for k in range(len(ids))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        client.close()
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump({"worker": args.name, "endpoint_key": key,
                   "deliveries": results + main_results}, f)
    print("%s: done" % args.name, file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
