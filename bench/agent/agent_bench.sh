#!/usr/bin/env bash
# bench/agent/agent_bench.sh: the agent lines of bench/run, measured side by
# side in one run on one staggerd and AGENTS stagger-agents (README.md here
# has the method; docs/PERFORMANCE.md the results).
#
#   agent_bench.sh BIN_DIR LOG_DIR
#
# BIN_DIR holds staggerd, stagger-agent and stagger-agent-load. Starts
# staggerd (free loopback port, --lease_ttl=LEASE_TTL, the bench config
# written below) and the agents (Unix sockets in a temporary folder), then
# runs stagger-agent-load:
#   1. calls: RATE deliveries/s through the agents, warm-up (one lease ttl
#      after staggerd started, plus the agents' ask interval) excluded,
#      CALLS_DURATION measured; then the same rate and threads straight to
#      staggerd (loopback TCP): calls_per_delivery and coordinator CPU.
#   2. capacity: closed loop through the agents, CAP_DURATION.
#   3. latency: LAT_REPEAT rounds, agents then direct, at half the capacity.
#   4. revoke: victims failing in turn at half the capacity (--revoke).
# Stops every process it started. Prints progress on stderr and, last, one
# line on stdout: "agent_bench key=value ..." (bench/run reads it).
# Exit status: 0, or 1 if a process could not start or a run failed.
#
# Environment (defaults in brackets):
#   AGENTS [4]  AGENT_ENDPOINTS [1000]  AGENT_THREADS [32]  RATE [5000]
#   LEASE_TTL [5s]  FLUSH_INTERVAL [500ms] (the agents')
#   CALLS_DURATION [10s]  CAP_DURATION [3s]  LAT_DURATION [4s]
#   LAT_REPEAT [3]  REVOKE_DURATION [25s]
#   BREAKER_FAILURES [1] consecutive failures that open a breaker
#   HALF_OPEN_PROBES [5]  OPEN_BASE_MS [200]
set -euo pipefail

[ $# -eq 2 ] || { echo "usage: $0 BIN_DIR LOG_DIR" >&2; exit 2; }
bin=$1 logs=$2
mkdir -p "$logs"
agents=${AGENTS:-4}
endpoints=${AGENT_ENDPOINTS:-1000}
threads=${AGENT_THREADS:-32}
rate=${RATE:-5000}
lease_ttl=${LEASE_TTL:-5s}
flush=${FLUSH_INTERVAL:-500ms}
calls_duration=${CALLS_DURATION:-10s}
cap_duration=${CAP_DURATION:-3s}
lat_duration=${LAT_DURATION:-4s}
lat_repeat=${LAT_REPEAT:-3}
revoke_duration=${REVOKE_DURATION:-25s}
breaker_failures=${BREAKER_FAILURES:-1}
probes=${HALF_OPEN_PROBES:-5}
open_base_ms=${OPEN_BASE_MS:-200}

say() { printf 'agent_bench: %s\n' "$*" >&2; }
die() { say "$*"; exit 1; }

work=$(mktemp -d "${TMPDIR:-/tmp}/stagger-agent-bench.XXXXXX")
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

# The policy every endpoint gets: a breaker that opens on the
# BREAKER_FAILURES-th consecutive failure (1: the failure that opens it is
# the one that revokes the leases: the revoke is measured at the trip),
# half-opens after OPEN_BASE_MS with HALF_OPEN_PROBES probes.
config=$work/bench.textproto
cat >"$config" <<EOF
default_policy {
  breaker {
    consecutive_failures: $breaker_failures
    open_base { nanos: $((open_base_ms * 1000000)) }
    open_max { seconds: 2 }
    half_open_probes: $probes
  }
}
EOF

# start NAME PATTERN CMD...: starts CMD, waits for a stderr line matching
# the sed PATTERN (its \1 goes to $ready) and sets $pid.
start() {
  local name=$1 pattern=$2; shift 2
  local err=$logs/$name.stderr
  "$@" 2>"$err" &
  pid=$!
  pids+=("$pid")
  for _ in $(seq 1 300); do
    ready=$(sed -n "s/$pattern/\\1/p" "$err" | head -n1)
    [ -n "$ready" ] && return 0
    kill -0 "$pid" 2>/dev/null || { cat "$err" >&2; die "$name exited"; }
    sleep 0.1
  done
  die "$name did not start within 30 s"
}

field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<"$2"; }
median() { sort -g | awk '{a[NR]=$1} END {if (NR==0) print "nan"; else print a[int((NR+1)/2)]}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {if (b+0==0) print "nan"; else printf "%.3f\n", a/b}'; }

say "starting staggerd and $agents agents ..."
t_start=$(date +%s.%N)
start staggerd '.*listening on 127\.0\.0\.1:\([0-9]*\) (metrics on port [0-9]*).*' \
  "$bin/staggerd" --address=127.0.0.1:0 --metrics_address=127.0.0.1:0 \
  --lease_ttl="$lease_ttl" --config="$config"
sd_port=$ready sd_pid=$pid
sd_metrics=127.0.0.1:$(sed -n 's/.*(metrics on port \([0-9]*\)).*/\1/p' "$logs/staggerd.stderr" | head -n1)
socks=() agent_pids=()
for i in $(seq 1 "$agents"); do
  start "agent$i" '.*\(listening on\).*' \
    "$bin/stagger-agent" --listen="unix:$work/a$i.sock" \
    --coordinator="127.0.0.1:$sd_port" --metrics_address= \
    --agent_id="bench-agent-$i" --flush_interval="$flush" --config="$config"
  socks+=("unix:$work/a$i.sock")
  agent_pids+=("$pid")
done
via=$(IFS=,; echo "${socks[*]}")
apids=$(IFS=,; echo "${agent_pids[*]}")
common=(--threads="$threads" --endpoints="$endpoints"
        --coordinator_metrics="$sd_metrics" --coordinator_pid="$sd_pid"
        --agent_pids="$apids")

# drive NAME ARGS...: one stagger-agent-load run; sets $line.
drive() {
  local name=$1; shift
  if ! "$bin/stagger-agent-load" "${common[@]}" "$@" \
      >"$logs/$name.out" 2>"$logs/$name.err"; then
    cat "$logs/$name.err" >&2
    die "run $name failed (output in $logs/$name.out)"
  fi
  line=$(grep '^result ' "$logs/$name.out" | tail -n1)
}

# 1. Calls and coordinator CPU at RATE, through the agents, then direct.
ttl_s=$(awk -v d="$lease_ttl" 'BEGIN { v = d + 0; if (d ~ /ms$/) v /= 1000; else if (d ~ /m$/) v *= 60; print v }')
warm=$(awk -v t="$ttl_s" -v s="$t_start" -v now="$(date +%s.%N)" \
  'BEGIN { w = s + t + 2 - now; printf "%.1fs", (w < 1 ? 1 : w) }')
say "calls via agents: $rate/s, warm-up $warm (learning mode), $calls_duration ..."
drive calls-agents --targets="$via" --rate="$rate" --warmup="$warm" --duration="$calls_duration"
calls_agents=$line
say "calls direct: $rate/s, $calls_duration ..."
drive calls-direct --targets="127.0.0.1:$sd_port" --rate="$rate" --warmup=1s --duration="$calls_duration"
calls_direct=$line

# 2. Capacity through the agents.
say "capacity via agents (closed loop, $cap_duration) ..."
drive capacity --targets="$via" --warmup=1s --duration="$cap_duration"
capacity=$(field achieved_per_sec "$line")
moderate=$(awk -v c="$capacity" 'BEGIN { printf "%.0f", c / 2 }')

# 3. Latency at half the capacity, alternating.
lat_a50=() lat_a99=() lat_d50=() lat_d99=()
for r in $(seq 1 "$lat_repeat"); do
  say "latency round $r/$lat_repeat at $moderate/s ..."
  drive "lat-agents-$r" --targets="$via" --rate="$moderate" --warmup=1s --duration="$lat_duration"
  lat_a50+=("$(field delivery_p50_us "$line")"); lat_a99+=("$(field delivery_p99_us "$line")")
  drive "lat-direct-$r" --targets="127.0.0.1:$sd_port" --rate="$moderate" --warmup=1s --duration="$lat_duration"
  lat_d50+=("$(field delivery_p50_us "$line")"); lat_d99+=("$(field delivery_p99_us "$line")")
done
a50=$(printf '%s\n' "${lat_a50[@]}" | median) a99=$(printf '%s\n' "${lat_a99[@]}" | median)
d50=$(printf '%s\n' "${lat_d50[@]}" | median) d99=$(printf '%s\n' "${lat_d99[@]}" | median)

# 4. Revocation at half the capacity.
say "revoke: victims failing in turn at $moderate/s, $revoke_duration ..."
drive revoke --targets="$via" --rate="$moderate" --warmup=1s \
  --duration="$revoke_duration" --revoke --half_open_probes="$probes"
revoke=$line

sd_cpu_agents=$(field coordinator_cpu_us_per_delivery "$calls_agents")
sd_cpu_direct=$(field coordinator_cpu_us_per_delivery "$calls_direct")
printf 'agent_bench agents=%s endpoints=%s threads=%s rate=%s lease_ttl=%s flush_interval=%s breaker_failures=%s' \
  "$agents" "$endpoints" "$threads" "$rate" "$lease_ttl" "$flush" "$breaker_failures"
printf ' achieved_agents=%s achieved_direct=%s calls_per_delivery=%s direct_calls_per_delivery=%s' \
  "$(field achieved_per_sec "$calls_agents")" "$(field achieved_per_sec "$calls_direct")" \
  "$(field calls_per_delivery "$calls_agents")" "$(field calls_per_delivery "$calls_direct")"
printf ' rpcs=%s sync_in=%s sync_out=%s local_admit_share=%s' \
  "$(field coordinator_rpcs "$calls_agents")" "$(field sync_in "$calls_agents")" \
  "$(field sync_out "$calls_agents")" "$(field local_admit_share "$calls_agents")"
printf ' sd_cpu_us_agents=%s sd_cpu_us_direct=%s coordinator_cpu_ratio=%s agent_cpu_us=%s' \
  "$sd_cpu_agents" "$sd_cpu_direct" "$(ratio "$sd_cpu_agents" "$sd_cpu_direct")" \
  "$(field agent_cpu_us_per_delivery "$calls_agents")"
printf ' capacity=%s moderate=%s lat_agent_p50_us=%s lat_agent_p99_us=%s lat_direct_p50_us=%s lat_direct_p99_us=%s' \
  "$capacity" "$moderate" "$a50" "$a99" "$d50" "$d99"
printf ' agent_latency_p50_ratio=%s agent_latency_p99_ratio=%s' "$(ratio "$a50" "$d50")" "$(ratio "$a99" "$d99")"
for k in achieved_per_sec victims tripped revoke_p50_ms revoke_p99_ms revoke_max_ms \
    open_report_p99_ms leaked_after_open lease_holders_at_open probe_periods \
    probe_max_in_flight probe_max_per_period half_open_probes probe_overshoot; do
  printf ' revoke_%s=%s' "${k#revoke_}" "$(field "$k" "$revoke")"
done
printf '\n'
