"""The worker client.python.package runs from the installed wheel, in a
virtual environment outside the repository (test_package.py copies it
there): it delivers --deliveries HTTP POSTs to --url through --target,
each one a RetryLoop run, and prints where `stagger` was imported from,
then each run's end. Exit 0 when every delivery succeeded."""

import argparse
import sys
import urllib.request

import stagger
from stagger import (Attempt, AttemptResult, CoordinatorClient, LoopEnd,
                     RetryLoop, endpoint_key_from_url)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--target", required=True)
    ap.add_argument("--url", required=True)
    ap.add_argument("--deliveries", type=int, default=3)
    args = ap.parse_args()
    print("stagger from", stagger.__file__)
    ok = True
    with CoordinatorClient(args.target, call_deadline=5.0) as client:
        loop = RetryLoop(client)
        key = endpoint_key_from_url(args.url)
        for i in range(args.deliveries):
            def send(a: Attempt) -> AttemptResult:
                req = urllib.request.Request(args.url, data=b'{"n": %d}' % i)
                with urllib.request.urlopen(req, timeout=a.timeout) as r:
                    return AttemptResult.from_http(r.status)
            result = loop.run(key, send)
            print("end", result.end.value, result.attempts_made)
            ok = ok and result.end is LoopEnd.SUCCEEDED
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
