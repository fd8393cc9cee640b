#!/usr/bin/env bash
# The example worker on its defaults (a 4 s outage, then 429s with
# Retry-After, 30 s delivery deadlines) against a real staggerd on a free
# loopback port: every delivery ends SUCCEEDED, none is given up or left
# parked. About 30 s of real time (the worker's own schedule); the outcome
# does not depend on the machine's speed, only on the deliveries' 30 s.
#   example_worker_test.sh STAGGERD EXAMPLE_WORKER
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: $0 STAGGERD EXAMPLE_WORKER" >&2; exit 2; }
staggerd=$1
worker=$2

err=$(mktemp)
out=$(mktemp)
"$staggerd" --address=127.0.0.1:0 --metrics_address= 2>"$err" &
pid=$!
trap 'kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; rm -f "$err" "$out"' EXIT

port=
for _ in $(seq 1 300); do
  port=$(sed -n 's/.*listening on [^ ]*:\([0-9][0-9]*\).*/\1/p' "$err" | head -n1)
  [ -n "$port" ] && break
  if ! kill -0 "$pid" 2>/dev/null; then
    echo "staggerd exited before listening:" >&2; cat "$err" >&2; exit 1
  fi
  sleep 0.1
done
[ -n "$port" ] || { echo "staggerd did not report a port" >&2; cat "$err" >&2; exit 1; }

"$worker" --coordinator="127.0.0.1:$port" --quiet >"$out" 2>&1
cat "$out"
summary=$(grep '^deliveries: ' "$out") || { echo "no summary line" >&2; exit 1; }
if ! [[ "$summary" =~ ^deliveries:\ ([0-9]+)\ \(SUCCEEDED\ ([0-9]+)\;\ still\ parked\ 0\)$ ]] ||
   [ "${BASH_REMATCH[1]}" != "${BASH_REMATCH[2]}" ]; then
  echo "FAIL: not every delivery succeeded: $summary" >&2
  exit 1
fi
echo "PASS: $summary"
