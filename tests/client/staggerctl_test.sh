#!/usr/bin/env bash
# staggerctl against a real plaintext staggerd on a free loopback port: the
# table and --json outputs, pause/resume/reset, and every exit code
# (commands.h): 0 done, 2 bad usage (unknown flag or command, bad value,
# missing operand), 3 unreachable, 5 not found, 6 invalid argument.
#   staggerctl_test.sh STAGGERD STAGGERCTL
set -uo pipefail
[ $# -eq 2 ] || { echo "usage: $0 STAGGERD STAGGERCTL" >&2; exit 2; }
staggerd=$1
ctl_bin=$2
err=$(mktemp)
"$staggerd" --address=127.0.0.1:0 --metrics_address= 2>"$err" &
pid=$!
trap 'kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; rm -f "$err"' EXIT
port=
for _ in $(seq 1 300); do
  port=$(sed -n 's/.*listening on [^ ]*:\([0-9][0-9]*\).*/\1/p' "$err" | head -n1)
  [ -n "$port" ] && break
  kill -0 "$pid" 2>/dev/null || { echo "staggerd exited:"; cat "$err"; exit 1; }
  sleep 0.1
done
[ -n "$port" ] || { echo "staggerd did not report a port"; exit 1; }

fail=0
# expect CODE PATTERN -- ARGS...: runs staggerctl, checks exit code and output.
expect() {
  local want=$1 pattern=$2; shift 3
  local out code
  out=$("$ctl_bin" --address="127.0.0.1:$port" "$@" 2>&1); code=$?
  if [ "$code" != "$want" ] || ! grep -qE -- "$pattern" <<<"$out"; then
    echo "FAIL: staggerctl $* -> exit $code (want $want), output:"; echo "$out"
    echo "  (wanted /$pattern/)"; fail=1
  else
    echo "ok: staggerctl $* -> $code"
  fi
}
key=https://partner.example/orders
expect 0 'tracked endpoints +0' -- status
expect 0 '"total_tracked": "0"' -- list --json
expect 5 'NOT_FOUND' -- get "$key"
expect 0 "paused https://partner.example/\* until" -- pause --prefix https://partner.example/ --for 10m --reason "their maintenance"
expect 0 'https://partner.example/\* +prefix +(9m5[0-9]s|10m).*their maintenance +unauthenticated' -- list --state=PAUSED
expect 0 '"reason": "their maintenance"' -- list --state=PAUSED --json
expect 0 'pauses in force +1' -- status
expect 0 "resumed https://partner.example/\*" -- resume --prefix https://partner.example/
expect 5 'no pause in force' -- resume --prefix https://partner.example/
expect 5 'NOT_FOUND: endpoint: not tracked' -- reset "$key"
expect 6 'INVALID_ARGUMENT: duration' -- pause "$key" --for 1000h --reason x
expect 2 'unknown flag --bogus' -- --bogus status
expect 2 'unknown command "frobnicate"' -- frobnicate
expect 2 "flag --for=abc" -- pause "$key" --for=abc --reason x
expect 2 'exactly one of KEY or --prefix' -- pause "$key" --prefix p --for 1m --reason x
expect 2 '--reason TEXT is required' -- pause "$key" --for 1m
expect 2 'expected OPEN, HALF_OPEN, CLOSED or PAUSED' -- list --state=SHUT
expect 2 'need --tls_ca_file' -- --tls_cert_file=/nonexistent status
expect 0 'Exit codes' -- --help
# Unreachable: a port nothing listens on (staggerd's own, after it stops).
kill "$pid"; wait "$pid" 2>/dev/null
expect 3 'UNAVAILABLE.*cannot reach staggerd' -- --timeout=2s status
exit $fail
