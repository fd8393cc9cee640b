#!/usr/bin/env bash
# staggerctl against a real plaintext staggerd on a free loopback port: the
# table and --json outputs, pause/resume/reset, disable/enable and
# list --state=DISABLED, watch (lines, --json, one line per operator's
# command across two replicas), and every exit code
# (commands.h): 0 done, 2 bad usage (unknown flag or command, bad value,
# missing operand), 3 unreachable, 5 not found, 6 invalid argument; and
# --address A,B against two staggerds (each command on both, exit codes
# combined as fan_out.h says).
#   staggerctl_test.sh STAGGERD STAGGERCTL
set -uo pipefail
[ $# -eq 2 ] || { echo "usage: $0 STAGGERD STAGGERCTL" >&2; exit 2; }
staggerd=$1
ctl_bin=$2
err=$(mktemp)
err2=$(mktemp)
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done; rm -f "$err" "$err2"' EXIT
# start_staggerd LOG: starts a plaintext staggerd logging to LOG; sets
# `started_pid` and `started_port`.
start_staggerd() {
  "$staggerd" --address=127.0.0.1:0 --metrics_address= 2>"$1" &
  started_pid=$!
  pids+=("$started_pid")
  started_port=
  for _ in $(seq 1 300); do
    started_port=$(sed -n 's/.*listening on [^ ]*:\([0-9][0-9]*\).*/\1/p' "$1" | head -n1)
    [ -n "$started_port" ] && return 0
    kill -0 "$started_pid" 2>/dev/null || { echo "staggerd exited:"; cat "$1"; exit 1; }
    sleep 0.1
  done
  echo "staggerd did not report a port"; exit 1
}
start_staggerd "$err"; pid=$started_pid; port=$started_port
start_staggerd "$err2"; port2=$started_port

fail=0
# [addr=A,B] expect CODE PATTERN -- ARGS...: runs staggerctl (at `addr`,
# default the first staggerd), checks exit code and output.
expect() {
  local want=$1 pattern=$2; shift 3
  local out code
  out=$("$ctl_bin" --address="${addr:-127.0.0.1:$port}" "$@" 2>&1); code=$?
  # The output as one line, so a pattern can span lines.
  if [ "$code" != "$want" ] || ! tr '\n' ' ' <<<"$out" | grep -qE -- "$pattern"; then
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
expect 2 'expected OPEN, HALF_OPEN, CLOSED, PAUSED or DISABLED' -- list --state=SHUT
expect 2 'need --tls_ca_file' -- --tls_cert_file=/nonexistent status
expect 0 'Exit codes' -- --help
# Two replicas: --address A,B runs the command on each, in order.
p=https://partner.example/
addr="127.0.0.1:$port,127.0.0.1:$port2" expect 0 "== 127.0.0.1:$port ==.*paused.*== 127.0.0.1:$port2 ==" -- pause --prefix "$p" --for 10m --reason maint
addr="127.0.0.1:$port2" expect 0 'pauses in force +1' -- status
addr="127.0.0.1:$port,127.0.0.1:$port2" expect 0 "== 127.0.0.1:$port == resumed .*== 127.0.0.1:$port2 == resumed " -- resume --prefix "$p"
addr="127.0.0.1:$port,127.0.0.1:$port2" expect 5 'no pause in force' -- resume --prefix "$p"
# NOT_FOUND where another replica succeeded is success (a pause on some).
addr="127.0.0.1:$port2" expect 0 'paused' -- pause --prefix "$p" --for 10m --reason maint
addr="127.0.0.1:$port,127.0.0.1:$port2" expect 0 'no pause in force' -- resume --prefix "$p"
addr="127.0.0.1:$port, ,127.0.0.1:$port2" expect 2 'an empty address' -- status
# Disable and enable, on both replicas; the watch of both prints one line
# per event (the disable once: one command, one operation id), or JSON.
gone=https://gone.example/hooks
expect 2 'disable: --reason TEXT is required' -- disable "$gone"
addr="127.0.0.1:$port,127.0.0.1:$port2" expect 0 "disabled $gone.*disabled $gone" -- disable "$gone" --reason "tenant deleted it"
expect 0 "$gone +OPERATOR .*tenant deleted it +unauthenticated" -- list --state=DISABLED
expect 0 '"trigger": "DISABLE_TRIGGER_OPERATOR"' -- list --state=DISABLED --json
expect 0 'disabled endpoints +1' -- status
expect 0 "disabled +OPERATOR since" -- get "$gone"
addr="127.0.0.1:$port,127.0.0.1:$port2" expect 0 "enabled $gone \\(disabled by OPERATOR" -- enable "$gone"
expect 5 'NOT_FOUND: endpoint: not disabled' -- enable "$gone"
expect 2 '--kinds: unknown kind "NOPE"' -- watch --kinds=NOPE
watch_out=$(mktemp); watch_json=$(mktemp)
"$ctl_bin" --address="127.0.0.1:$port,127.0.0.1:$port2" watch --history --kinds=disabled,ENABLED >"$watch_out" 2>/dev/null &
wpid=$!
"$ctl_bin" --address="127.0.0.1:$port" watch --history --json --kinds=DISABLED >"$watch_json" 2>/dev/null &
jpid=$!
for _ in $(seq 1 200); do
  [ "$(grep -c ' ENABLED ' "$watch_out")" = 1 ] && [ -s "$watch_json" ] && break
  sleep 0.1
done
kill -TERM "$wpid" "$jpid"; wait "$wpid"; wcode=$?; wait "$jpid"
if [ "$wcode" = 0 ] && [ "$(grep -c " DISABLED $gone trigger=OPERATOR reason=\"tenant deleted it\" by=unauthenticated op=ctl-" "$watch_out")" = 1 ] &&
   [ "$(grep -c " ENABLED $gone" "$watch_out")" = 1 ] && [ "$(wc -l <"$watch_out")" = 2 ] &&
   grep -q '"kind":"EVENT_DISABLED"' "$watch_json"; then
  echo "ok: staggerctl watch: one line per event, once across replicas, --json"
else
  echo "FAIL: staggerctl watch (exit $wcode):"; cat "$watch_out" "$watch_json"; fail=1
fi
# --resume_file: a second watch starts right after what the first saw.
tokens=$(mktemp -u)
"$ctl_bin" --address="127.0.0.1:$port" watch --history --resume_file="$tokens" >"$watch_out" 2>/dev/null &
wpid=$!
for _ in $(seq 1 200); do grep -q ' ENABLED ' "$watch_out" && [ -s "$tokens" ] && break; sleep 0.1; done
kill -TERM "$wpid"; wait "$wpid"
expect 0 "disabled https://later.example/x" -- disable https://later.example/x --reason later
"$ctl_bin" --address="127.0.0.1:$port" watch --resume_file="$tokens" >"$watch_out" 2>/dev/null &
wpid=$!
for _ in $(seq 1 200); do grep -q 'later.example' "$watch_out" && break; sleep 0.1; done
kill -TERM "$wpid"; wait "$wpid"
if [ "$(wc -l <"$watch_out")" = 1 ] && grep -q ' DISABLED https://later.example/x ' "$watch_out" &&
   grep -q "^127.0.0.1:$port [0-9a-f]*\.[0-9]*$" "$tokens"; then
  echo "ok: staggerctl watch --resume_file: the new event, nothing before it"
else
  echo "FAIL: staggerctl watch --resume_file:"; cat "$watch_out" "$tokens"; fail=1
fi
rm -f "$watch_out" "$watch_json" "$tokens"
# Unreachable: a port nothing listens on (staggerd's own, after it stops).
kill "$pid"; wait "$pid" 2>/dev/null
expect 3 'UNAVAILABLE.*cannot reach staggerd' -- --timeout=2s status
exit $fail
