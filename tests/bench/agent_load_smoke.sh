#!/usr/bin/env bash
# Agent bench smoke test: bench/agent/agent_bench.sh, scaled down (2 agents,
# 20 endpoints, a 1 s lease ttl, runs of 1-4 s), against the real staggerd
# and stagger-agent. Passes iff every run succeeds (no RPC error, some
# deliveries, a victim tripped) and the summary line holds every field
# with a number. Sanity only, never a target or a time: straight to
# staggerd a delivery costs about 2 coordinator calls (1.5..2.5 allowed for
# the edges of the window), and victims were measured.
#   agent_load_smoke.sh AGENT_BENCH BIN_DIR
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: $0 AGENT_BENCH BIN_DIR" >&2; exit 2; }
logs=$(mktemp -d "${TMPDIR:-/tmp}/stagger-agent-smoke.XXXXXX")
trap 'rm -rf "$logs"' EXIT

out=$(AGENTS=2 AGENT_ENDPOINTS=20 AGENT_THREADS=4 RATE=200 LEASE_TTL=1s \
      FLUSH_INTERVAL=100ms CALLS_DURATION=2s CAP_DURATION=1s LAT_DURATION=1s \
      LAT_REPEAT=1 REVOKE_DURATION=4s "$1" "$2" "$logs") || {
  for f in "$logs"/*; do echo "== $f"; tail -n 20 "$f"; done >&2
  exit 1
}
line=$(grep '^agent_bench ' <<<"$out" | tail -n1)
echo "$line"
fail() { echo "FAIL: $*" >&2; exit 1; }
field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<"$line"; }
number='^-?[0-9]+(\.[0-9]+)?$'
for k in achieved_agents achieved_direct calls_per_delivery \
    direct_calls_per_delivery sd_cpu_us_agents sd_cpu_us_direct capacity \
    lat_agent_p50_us lat_agent_p99_us lat_direct_p50_us lat_direct_p99_us \
    lat_one_agent_p50_us scaled_calls_per_delivery \
    revoke_victims revoke_tripped revoke_p99_ms revoke_leaked_after_open \
    revoke_probe_periods revoke_probe_max_in_flight revoke_probe_overshoot; do
  [[ $(field "$k") =~ $number ]] || fail "$k is \"$(field "$k")\", not a number"
done
awk -v d="$(field direct_calls_per_delivery)" 'BEGIN { exit !(d >= 1.5 && d <= 2.5) }' ||
  fail "direct_calls_per_delivery $(field direct_calls_per_delivery): want about 2"
(( $(field revoke_tripped) >= 1 )) || fail "no victim tripped"
echo "ok"
