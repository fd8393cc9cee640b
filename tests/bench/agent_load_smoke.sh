#!/usr/bin/env bash
# Agent bench smoke test: bench/agent/agent_bench.sh, scaled down (2 agents
# then 3, 20 endpoints at the design point and 2,000 on the long tail, a
# 1 s lease ttl, runs of 1-2 s, a push bench of 2 streams), against the
# real staggerd, stagger-agent and stagger-push-bench. Passes iff every run
# succeeds (no RPC error, some deliveries, a victim tripped, every pushed
# key arrived) and the summary line holds every field with a number.
# Sanity only, never a target or a time: straight to staggerd a delivery
# costs about 2 coordinator calls (1.5..2.5 allowed for the edges of the
# window), victims were measured, and the failing run had failures that
# were retried.
#   agent_load_smoke.sh AGENT_BENCH BIN_DIR
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: $0 AGENT_BENCH BIN_DIR" >&2; exit 2; }
logs=$(mktemp -d "${TMPDIR:-/tmp}/stagger-agent-smoke.XXXXXX")
trap 'rm -rf "$logs"' EXIT

out=$(AGENTS=2 LONG_AGENTS=3 AGENT_ENDPOINTS=20 AGENT_THREADS=6 RATE=200 \
      LEASE_TTL=1s PROBE_TIMEOUT_MS=1000 FLUSH_INTERVAL=100ms CALLS_DURATION=2s \
      CAP_DURATION=1s LAT_DURATION=1s LAT_REPEAT=1 VICTIM_DURATION=4s \
      LONG_RATE=150 LONG_ENDPOINTS=2000 SHORT_ENDPOINTS=50 FAIL_SHARE=0.2 \
      LONG_WARMUP=1s LONG_DURATION=2s DIRECT_DURATION=1s IDLE_SECONDS=1 PUSH_STREAMS=2 \
      PUSH_TRIALS=5 MASS_KEYS=1500 "$1" "$2" "$logs") || {
  for f in "$logs"/*; do echo "== $f"; tail -n 20 "$f"; done >&2
  exit 1
}
line=$(grep '^agent_bench ' <<<"$out" | tail -n1)
echo "$line"
fail() { echo "FAIL: $*" >&2; exit 1; }
field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<"$line"; }
number='^-?[0-9]+(\.[0-9]+)?$'
for k in achieved_per_sec achieved_direct calls_per_delivery sync_in_per_agent_sec \
    direct_calls_per_delivery coordinator_cpu_us_per_delivery \
    direct_cpu_us_per_delivery capacity \
    lat_agent_p50_us lat_agent_p99_us lat_direct_p50_us lat_direct_p99_us \
    lat_one_agent_p50_us \
    victim_victims victim_tripped victim_stop_p99_ms victim_local_after_open \
    victim_probe_periods victim_probe_max_in_flight victim_probe_overshoot \
    long_calls_per_delivery long_sync_in long_sync_out long_sync_in_per_agent_sec \
    short_calls_per_delivery short_sync_in_per_agent_sec \
    fail_calls_per_delivery fail_failed fail_retried long_direct_achieved_per_sec \
    idle_cpu_ms_per_sec \
    push_p99_ms mass_push_p99_ms mass_bytes_per_stream push_readded; do
  [[ $(field "$k") =~ $number ]] || fail "$k is \"$(field "$k")\", not a number"
done
awk -v d="$(field direct_calls_per_delivery)" 'BEGIN { exit !(d >= 1.5 && d <= 2.5) }' ||
  fail "direct_calls_per_delivery $(field direct_calls_per_delivery): want about 2"
(( $(field victim_tripped) >= 1 )) || fail "no victim tripped"
(( $(field fail_failed) >= 1 && $(field fail_retried) >= 1 )) ||
  fail "the failing run: $(field fail_failed) failed, $(field fail_retried) retried"
echo "ok"
