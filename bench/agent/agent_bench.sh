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
#   1. calls: RATE deliveries/s through the agents; the warm-up (until one
#      lease ttl after staggerd started, learning mode, plus 2 s for the
#      agents' ask interval, and then until every worker has delivered to
#      each of its keys once) excluded, CALLS_DURATION measured.
#      If the machine delivers fewer than RATE/s, the same again with the
#      endpoints scaled down (AGENT_ENDPOINTS x achieved / RATE), so that each
#      (agent, endpoint) pair sees a delivery as often as at RATE/s: the
#      design point's lease traffic on a machine that cannot reach it.
#   2. capacity: closed loop through the agents, CAP_DURATION.
#   3. calls direct: RATE deliveries/s, the same threads, straight to
#      staggerd (loopback TCP): calls_per_delivery and coordinator CPU.
#   4. latency: LAT_REPEAT rounds, agents then direct, at a quarter of the
#      capacity (a light load: latency, not queueing on the two shared CPUs),
#      on LAT_ENDPOINTS endpoints (every agent's leases stay live at that
#      rate: the lease path is what is compared). Each round also sends the
#      same load through the first agent alone (the other three idle): the
#      agents' count on two CPUs apart from the path itself.
#   5. revoke: victims failing in turn at half the capacity (--revoke),
#      beside LAT_ENDPOINTS healthy ones.
# Stops every process it started. Prints progress on stderr and, last, one
# line on stdout: "agent_bench key=value ..." (bench/run reads it).
# Exit status: 0, or 1 if a process could not start or a run failed.
#
# Environment (defaults in brackets):
#   AGENTS [4]  AGENT_ENDPOINTS [1000]  AGENT_THREADS [32]  RATE [5000]
#   LEASE_TTL [5s]  FLUSH_INTERVAL [500ms] (the agents')
#   CALLS_DURATION [10s]  CAP_DURATION [3s]  LAT_DURATION [5s]
#   LAT_REPEAT [3]  LAT_ENDPOINTS [100]  REVOKE_DURATION [25s]
#   BREAKER_FAILURES [1] consecutive failures that open a breaker
#   HALF_OPEN_PROBES [5]  OPEN_BASE_MS [200]
#   STAGGERD_ENV, AGENT_ENV: extra environment (VAR=value ...) for staggerd
#     and for the agents, for experiments (e.g. GLIBC_TUNABLES=...)
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
lat_duration=${LAT_DURATION:-5s}
lat_repeat=${LAT_REPEAT:-3}
lat_endpoints=${LAT_ENDPOINTS:-100}
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
  env ${STAGGERD_ENV:-} "$bin/staggerd" --address=127.0.0.1:0 --metrics_address=127.0.0.1:0 \
  --lease_ttl="$lease_ttl" --config="$config"
sd_port=$ready sd_pid=$pid
sd_metrics=127.0.0.1:$(sed -n 's/.*(metrics on port \([0-9]*\)).*/\1/p' "$logs/staggerd.stderr" | head -n1)
socks=() agent_pids=()
for i in $(seq 1 "$agents"); do
  start "agent$i" '.*\(listening on\).*' \
    env ${AGENT_ENV:-} "$bin/stagger-agent" --listen="unix:$work/a$i.sock" \
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

# 1. Calls and coordinator CPU at RATE through the agents.
ttl_s=$(awk -v d="$lease_ttl" 'BEGIN { v = d + 0; if (d ~ /ms$/) v /= 1000; else if (d ~ /m$/) v *= 60; print v }')
warm=$(awk -v t="$ttl_s" -v s="$t_start" -v now="$(date +%s.%N)" \
  'BEGIN { w = s + t + 2 - now; printf "%.1fs", (w < 1 ? 1 : w) }')
say "calls via agents: $rate/s, warm-up $warm (learning mode) + one lap of the keys, $calls_duration ..."
drive calls-agents --targets="$via" --rate="$rate" --warmup="$warm" --warmup_covers \
  --duration="$calls_duration"
calls_agents=$line
achieved=$(field achieved_per_sec "$calls_agents")
scaled=$(awk -v e="$endpoints" -v a="$achieved" -v r="$rate" \
  'BEGIN { s = int(e * a / r + 0.5); print (s < 10 ? 10 : (s > e ? e : s)) }')
calls_scaled=$calls_agents
if (( scaled < endpoints )); then
  say "calls via agents, $scaled endpoints (the per-pair rate of $rate/s) ..."
  drive calls-scaled --targets="$via" --rate="$rate" --endpoints="$scaled" \
    --warmup=1s --warmup_covers --duration="$calls_duration"
  calls_scaled=$line
fi

# 2. Capacity through the agents (their leases still live).
say "capacity via agents (closed loop, $cap_duration) ..."
drive capacity --targets="$via" --warmup=1s --warmup_covers --duration="$cap_duration"
capacity=$(field achieved_per_sec "$line")
moderate=$(awk -v c="$capacity" 'BEGIN { printf "%.0f", c / 2 }')
light=$(awk -v c="$capacity" 'BEGIN { printf "%.0f", c / 4 }')

# 3. The same offered rate straight to staggerd.
say "calls direct: $rate/s, $calls_duration ..."
drive calls-direct --targets="127.0.0.1:$sd_port" --rate="$rate" --warmup=1s --duration="$calls_duration"
calls_direct=$line

# 4. Latency at a quarter of the capacity, alternating.
lat_a50=() lat_a99=() lat_d50=() lat_d99=() lat_o50=() lat_o99=()
lat=(--rate="$light" --endpoints="$lat_endpoints" --warmup=1s --duration="$lat_duration")
for r in $(seq 1 "$lat_repeat"); do
  say "latency round $r/$lat_repeat at $light/s, $lat_endpoints endpoints ..."
  drive "lat-agents-$r" --targets="$via" --warmup_covers "${lat[@]}"
  lat_a50+=("$(field delivery_p50_us "$line")"); lat_a99+=("$(field delivery_p99_us "$line")")
  drive "lat-direct-$r" --targets="127.0.0.1:$sd_port" "${lat[@]}"
  lat_d50+=("$(field delivery_p50_us "$line")"); lat_d99+=("$(field delivery_p99_us "$line")")
  drive "lat-one-agent-$r" --targets="${socks[0]}" --warmup_covers "${lat[@]}"
  lat_o50+=("$(field delivery_p50_us "$line")"); lat_o99+=("$(field delivery_p99_us "$line")")
done
o50=$(printf '%s\n' "${lat_o50[@]}" | median) o99=$(printf '%s\n' "${lat_o99[@]}" | median)
a50=$(printf '%s\n' "${lat_a50[@]}" | median) a99=$(printf '%s\n' "${lat_a99[@]}" | median)
d50=$(printf '%s\n' "${lat_d50[@]}" | median) d99=$(printf '%s\n' "${lat_d99[@]}" | median)

# 5. Revocation at half the capacity.
say "revoke: victims failing in turn at $moderate/s, $revoke_duration ..."
drive revoke --targets="$via" --rate="$moderate" --endpoints="$lat_endpoints" \
  --warmup=1s --duration="$revoke_duration" --revoke --half_open_probes="$probes" \
  --victim_log="$logs/revoke-victims.txt"
revoke=$line

sd_cpu_agents=$(field coordinator_cpu_us_per_delivery "$calls_agents")
sd_cpu_direct=$(field coordinator_cpu_us_per_delivery "$calls_direct")
printf 'agent_bench agents=%s endpoints=%s threads=%s rate=%s lease_ttl=%s flush_interval=%s breaker_failures=%s' \
  "$agents" "$endpoints" "$threads" "$rate" "$lease_ttl" "$flush" "$breaker_failures"
printf ' achieved_agents=%s achieved_direct=%s calls_per_delivery=%s direct_calls_per_delivery=%s' \
  "$(field achieved_per_sec "$calls_agents")" "$(field achieved_per_sec "$calls_direct")" \
  "$(field calls_per_delivery "$calls_agents")" "$(field calls_per_delivery "$calls_direct")"
printf ' scaled_endpoints=%s scaled_achieved=%s scaled_calls_per_delivery=%s scaled_local_admit_share=%s' \
  "$scaled" "$(field achieved_per_sec "$calls_scaled")" "$(field calls_per_delivery "$calls_scaled")" \
  "$(field local_admit_share "$calls_scaled")"
printf ' scaled_cpu_ratio=%s' "$(ratio "$(field coordinator_cpu_us_per_delivery "$calls_scaled")" \
  "$(field coordinator_cpu_us_per_delivery "$calls_direct")")"
printf ' rpcs=%s sync_in=%s sync_out=%s local_admit_share=%s' \
  "$(field coordinator_rpcs "$calls_agents")" "$(field sync_in "$calls_agents")" \
  "$(field sync_out "$calls_agents")" "$(field local_admit_share "$calls_agents")"
printf ' sd_cpu_us_agents=%s sd_cpu_us_direct=%s coordinator_cpu_ratio=%s agent_cpu_us=%s' \
  "$sd_cpu_agents" "$sd_cpu_direct" "$(ratio "$sd_cpu_agents" "$sd_cpu_direct")" \
  "$(field agent_cpu_us_per_delivery "$calls_agents")"
printf ' calls_warmup_s=%s lat_local_admit_share=%s' "$(field warmup_seconds "$calls_agents")" \
  "$(field local_admit_share "$(grep '^result ' "$logs/lat-agents-1.out")")"
printf ' lat_endpoints=%s capacity=%s moderate=%s light=%s lat_agent_p50_us=%s lat_agent_p99_us=%s lat_direct_p50_us=%s lat_direct_p99_us=%s' \
  "$lat_endpoints" "$capacity" "$moderate" "$light" "$a50" "$a99" "$d50" "$d99"
printf ' agent_latency_p50_ratio=%s agent_latency_p99_ratio=%s' "$(ratio "$a50" "$d50")" "$(ratio "$a99" "$d99")"
printf ' lat_one_agent_p50_us=%s lat_one_agent_p99_us=%s one_agent_latency_p50_ratio=%s one_agent_latency_p99_ratio=%s' \
  "$o50" "$o99" "$(ratio "$o50" "$d50")" "$(ratio "$o99" "$d99")"
for k in started_per_sec victims tripped revoke_p50_ms revoke_p99_ms revoke_max_ms \
    open_report_p99_ms leaked_after_open lease_holders_at_open probe_periods \
    probe_max_in_flight probe_max_per_period half_open_probes probe_overshoot; do
  printf ' revoke_%s=%s' "${k#revoke_}" "$(field "$k" "$revoke")"
done
printf '\n'
