#!/usr/bin/env bash
# bench/agent/agent_bench.sh: the agent lines of bench/run, measured side by
# side in one run on one staggerd and its stagger-agents (README.md here
# has the method; docs/PERFORMANCE.md the results).
#
#   agent_bench.sh BIN_DIR LOG_DIR
#
# BIN_DIR holds staggerd, stagger-agent, stagger-agent-load and
# stagger-push-bench. Starts staggerd (free loopback port, --lease_ttl
# LEASE_TTL, the bench config written below) and AGENTS agents (Unix
# sockets in a temporary folder), then runs stagger-agent-load:
#   1. design point: RATE deliveries/s through the AGENTS agents, uniform
#      over AGENT_ENDPOINTS keys; the warm-up (staggerd's learning period:
#      no stream lease before it has run LEASE_TTL and the config's longest
#      probe_timeout, then the agents' next message, + 1 s) excluded;
#      CALLS_DURATION measured.
#   2. capacity: closed loop through the agents, CAP_DURATION.
#   3. calls direct: RATE deliveries/s, the same threads, straight to
#      staggerd (loopback TCP): calls and coordinator CPU without agents.
#   4. latency: LAT_REPEAT rounds, agents then direct, at a quarter of the
#      capacity (a light load: latency, not queueing on the two shared CPUs),
#      on LAT_ENDPOINTS endpoints. Each round also sends the same load
#      through the first agent alone (the other agents idle).
#   5. victims: victim endpoints failing in turn at half the capacity
#      (--victims), beside LAT_ENDPOINTS healthy ones: how long agents keep
#      answering a victim locally once its breaker opened, and half-open
#      probes in flight against their quota.
# Then LONG_AGENTS - AGENTS more agents start, and:
#   6. idle: staggerd's CPU over IDLE_SECONDS with every agent connected
#      and no deliveries (what the lease streams cost by themselves);
#   through all of the agents:
#   7. long tail: LONG_RATE/s, Zipf(ZIPF) over LONG_ENDPOINTS keys,
#      LONG_WARMUP excluded, LONG_DURATION measured;
#   8. the same over SHORT_ENDPOINTS keys (sync messages in at 1,000
#      endpoints and at 100,000 alike);
#   9. the long tail again with FAIL_SHARE of the first attempts failing
#      (each retried once, after the backoff its failure report's answer
#      gives);
#  10. the long tail straight to staggerd (DIRECT_DURATION), healthy and
#      failing: the references of the coordinator CPU ratios (and of the
#      retries' waits).
# Last, with the daemons stopped (the CPUs to itself):
#  11. stagger-push-bench: its own staggerd and PUSH_STREAMS lease streams;
#      push latency of PUSH_TRIALS keys entering one at a time, then of
#      MASS_KEYS at once, with the bytes each stream took.
# Stops every process it started. Prints progress on stderr and, last, one
# line on stdout: "agent_bench key=value ..." (bench/run reads it).
# Exit status: 0, or 1 if a process could not start or a run failed.
#
# Environment (defaults in brackets):
#   AGENTS [4]  AGENT_ENDPOINTS [1000]  AGENT_THREADS [32]  RATE [5000]
#   LEASE_TTL [2s] (staggerd's default)  PROBE_TIMEOUT_MS [2000] (the
#   config's breaker.probe_timeout: with the ttl, the learning period)
#   FLUSH_INTERVAL [1s] (the agents')
#   CALLS_DURATION [10s]  CAP_DURATION [3s]  LAT_DURATION [5s]
#   LAT_REPEAT [3]  LAT_ENDPOINTS [100]  VICTIM_DURATION [25s]
#   HALF_OPEN_PROBES [5]  OPEN_BASE_MS [200] (the victims' breaker)
#   LONG_AGENTS [8]  LONG_RATE [2000]  LONG_ENDPOINTS [100000]
#   SHORT_ENDPOINTS [1000]  ZIPF [1.0]  SEED [1]  FAIL_SHARE [0.02]
#   LONG_WARMUP [10s]  LONG_DURATION [30s]  DIRECT_DURATION [10s]
#   IDLE_SECONDS [20]
#   PUSH_STREAMS [8]  PUSH_TRIALS [200]  MASS_KEYS [10000]
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
lease_ttl=${LEASE_TTL:-2s}
probe_timeout_ms=${PROBE_TIMEOUT_MS:-2000}
flush=${FLUSH_INTERVAL:-1s}
calls_duration=${CALLS_DURATION:-10s}
cap_duration=${CAP_DURATION:-3s}
lat_duration=${LAT_DURATION:-5s}
lat_repeat=${LAT_REPEAT:-3}
lat_endpoints=${LAT_ENDPOINTS:-100}
victim_duration=${VICTIM_DURATION:-25s}
probes=${HALF_OPEN_PROBES:-5}
open_base_ms=${OPEN_BASE_MS:-200}
long_agents=${LONG_AGENTS:-8}
long_rate=${LONG_RATE:-2000}
long_endpoints=${LONG_ENDPOINTS:-100000}
short_endpoints=${SHORT_ENDPOINTS:-1000}
zipf=${ZIPF:-1.0}
seed=${SEED:-1}
fail_share=${FAIL_SHARE:-0.02}
long_warmup=${LONG_WARMUP:-10s}
long_duration=${LONG_DURATION:-30s}
direct_duration=${DIRECT_DURATION:-10s}
idle_seconds=${IDLE_SECONDS:-20}
push_streams=${PUSH_STREAMS:-8}
push_trials=${PUSH_TRIALS:-200}
mass_keys=${MASS_KEYS:-10000}

say() { printf 'agent_bench: %s\n' "$*" >&2; }
die() { say "$*"; exit 1; }

(( long_agents >= agents )) || die "LONG_AGENTS ($long_agents) < AGENTS ($agents)"
# Victim keys (bench key ids from 9,000,000) get their own policy by the
# prefix below; background ids must not share it.
(( endpoints <= 900000 && long_endpoints <= 900000 && short_endpoints <= 900000 )) ||
  die "endpoints over 900,000 would share the victims' prefix"

work=$(mktemp -d "${TMPDIR:-/tmp}/stagger-agent-bench.XXXXXX")
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  pids=()
}
trap 'cleanup; rm -rf "$work"' EXIT

# The policy: staggerd's defaults but a short probe_timeout (a new
# staggerd grants no stream lease before it has run its ttl and the
# longest probe_timeout: the learning period); the victims (their own
# prefix) get a breaker that opens on the first failure (the failure that
# opens it is the one that takes the key out of clear, so the push is
# measured at the trip) and half-opens after OPEN_BASE_MS with
# HALF_OPEN_PROBES probes. Only the breaker differs, not the initial
# jitter: the agents' copy of the policy stays uniform.
config=$work/bench.textproto
cat >"$config" <<EOF
default_policy {
  breaker {
    probe_timeout { seconds: $((probe_timeout_ms / 1000)) nanos: $((probe_timeout_ms % 1000 * 1000000)) }
  }
}
overrides {
  prefix: "https://hooks.tenant-9"
  policy {
    breaker {
      consecutive_failures: 1
      open_base { nanos: $((open_base_ms * 1000000)) }
      open_max { seconds: 2 }
      half_open_probes: $probes
    }
  }
}
EOF

# start NAME PATTERN CMD...: starts CMD, waits for a stderr line matching
# the sed PATTERN (its \1 goes to $ready) and sets $pid.
start() {
  local name=$1 pattern=$2; shift 2
  local err=$logs/$name.stderr
  : >"$err"  # exists before the first sed below, whenever the child opens it
  "$@" 2>>"$err" &
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

field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<" $2"; }
median() { sort -g | awk '{a[NR]=$1} END {if (NR==0) print "nan"; else print a[int((NR+1)/2)]}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {if (b+0==0 || a=="") print "nan"; else printf "%.3f\n", a/b}'; }
seconds() { awk -v d="$1" 'BEGIN { v = d + 0; if (d ~ /ms$/) v /= 1000; else if (d ~ /m$/) v *= 60; print v }'; }

say "starting staggerd and $agents agents ..."
t_start=$(date +%s.%N)
start staggerd '.*listening on 127\.0\.0\.1:\([0-9]*\) (metrics on port [0-9]*).*' \
  env ${STAGGERD_ENV:-} "$bin/staggerd" --address=127.0.0.1:0 --metrics_address=127.0.0.1:0 \
  --lease_ttl="$lease_ttl" --config="$config"
sd_port=$ready sd_pid=$pid
sd_metrics=127.0.0.1:$(sed -n 's/.*(metrics on port \([0-9]*\)).*/\1/p' "$logs/staggerd.stderr" | head -n1)
socks=() agent_pids=()
# start_agents FROM TO: agents FROM..TO (1-based).
start_agents() {
  for i in $(seq "$1" "$2"); do
    start "agent$i" '.*\(listening on\).*' \
      env ${AGENT_ENV:-} "$bin/stagger-agent" --listen="unix:$work/a$i.sock" \
      --coordinator="127.0.0.1:$sd_port" --metrics_address= \
      --agent_id="bench-agent-$i" --flush_interval="$flush" --config="$config"
    socks+=("unix:$work/a$i.sock")
    agent_pids+=("$pid")
  done
  via=$(IFS=,; echo "${socks[*]}")
  apids=$(IFS=,; echo "${agent_pids[*]}")
}
start_agents 1 "$agents"

# drive NAME ARGS...: one stagger-agent-load run; sets $line.
drive() {
  local name=$1; shift
  if ! "$bin/stagger-agent-load" --threads="$threads" \
      --coordinator_metrics="$sd_metrics" --coordinator_pid="$sd_pid" "$@" \
      >"$logs/$name.out" 2>"$logs/$name.err"; then
    cat "$logs/$name.err" >&2
    die "run $name failed (output in $logs/$name.out)"
  fi
  line=$(grep '^result ' "$logs/$name.out" | tail -n1)
}
agents_run() { drive "$@" --targets="$via" --agent_pids="$apids"; }
direct_run() { drive "$@" --targets="127.0.0.1:$sd_port"; }
design=(--endpoints="$endpoints")

# 1. The design point through the agents, once leases can be granted.
learn=$(awk -v t="$(seconds "$lease_ttl")" -v p="$probe_timeout_ms" \
  'BEGIN { p /= 1000; print (t > p ? t : p) }')
warm=$(awk -v l="$learn" -v f="$(seconds "$flush")" -v s="$t_start" -v now="$(date +%s.%N)" \
  'BEGIN { w = s + l + f + 1 - now; printf "%.1fs", (w < 2 ? 2 : w) }')
say "design point via $agents agents: $rate/s, warm-up $warm (learning period), $calls_duration ..."
agents_run calls-agents "${design[@]}" --rate="$rate" --warmup="$warm" --duration="$calls_duration"
calls_agents=$line

# 2. Capacity through the agents.
say "capacity via agents (closed loop, $cap_duration) ..."
agents_run capacity "${design[@]}" --warmup=1s --duration="$cap_duration"
capacity=$(field achieved_per_sec "$line")
moderate=$(awk -v c="$capacity" 'BEGIN { printf "%.0f", c / 2 }')
light=$(awk -v c="$capacity" 'BEGIN { printf "%.0f", c / 4 }')

# 3. The same offered rate straight to staggerd.
say "design point direct: $rate/s, $calls_duration ..."
direct_run calls-direct "${design[@]}" --rate="$rate" --warmup=1s --duration="$calls_duration"
calls_direct=$line

# 4. Latency at a quarter of the capacity, alternating.
lat_a50=() lat_a99=() lat_d50=() lat_d99=() lat_o50=() lat_o99=()
lat=(--rate="$light" --endpoints="$lat_endpoints" --warmup=1s --duration="$lat_duration")
for r in $(seq 1 "$lat_repeat"); do
  say "latency round $r/$lat_repeat at $light/s, $lat_endpoints endpoints ..."
  agents_run "lat-agents-$r" "${lat[@]}"
  lat_a50+=("$(field delivery_p50_us "$line")"); lat_a99+=("$(field delivery_p99_us "$line")")
  direct_run "lat-direct-$r" "${lat[@]}"
  lat_d50+=("$(field delivery_p50_us "$line")"); lat_d99+=("$(field delivery_p99_us "$line")")
  drive "lat-one-agent-$r" --targets="${socks[0]}" "${lat[@]}"
  lat_o50+=("$(field delivery_p50_us "$line")"); lat_o99+=("$(field delivery_p99_us "$line")")
done
o50=$(printf '%s\n' "${lat_o50[@]}" | median) o99=$(printf '%s\n' "${lat_o99[@]}" | median)
a50=$(printf '%s\n' "${lat_a50[@]}" | median) a99=$(printf '%s\n' "${lat_a99[@]}" | median)
d50=$(printf '%s\n' "${lat_d50[@]}" | median) d99=$(printf '%s\n' "${lat_d99[@]}" | median)

# 5. Victims at half the capacity.
say "victims failing in turn at $moderate/s, $victim_duration ..."
agents_run victims --rate="$moderate" --endpoints="$lat_endpoints" \
  --warmup=1s --duration="$victim_duration" --victims --half_open_probes="$probes" \
  --victim_log="$logs/victim-log.txt"
victims=$line

# 6. Idle, every agent connected (after a second for their streams).
start_agents $((agents + 1)) "$long_agents"
sleep 1
say "idle: staggerd's CPU with $long_agents agents and no deliveries, ${idle_seconds}s ..."
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }  # utime + stime
idle_t0=$(ticks "$sd_pid")
sleep "$idle_seconds"
idle_cpu=$(awk -v a="$idle_t0" -v b="$(ticks "$sd_pid")" -v hz="$(getconf CLK_TCK)" \
  -v s="$idle_seconds" 'BEGIN { printf "%.2f", (b - a) / hz * 1000 / s }')

# 7-9. The long tail through LONG_AGENTS agents.
long=(--keys=zipf --zipf_exponent="$zipf" --seed="$seed" --rate="$long_rate")
say "long tail via $long_agents agents: Zipf($zipf) over $long_endpoints keys, $long_rate/s, $long_warmup + $long_duration ..."
agents_run long "${long[@]}" --endpoints="$long_endpoints" --warmup="$long_warmup" \
  --duration="$long_duration"
long_line=$line
say "the same over $short_endpoints keys ..."
agents_run short "${long[@]}" --endpoints="$short_endpoints" --warmup=5s \
  --duration="$long_duration"
short_line=$line
say "long tail with $fail_share of first attempts failing ..."
agents_run failing "${long[@]}" --endpoints="$long_endpoints" --fail_share="$fail_share" \
  --warmup=5s --duration="$long_duration"
fail_line=$line
say "long tail direct, healthy then failing, $direct_duration each ..."
direct_run long-direct "${long[@]}" --endpoints="$long_endpoints" --warmup=1s \
  --duration="$direct_duration"
long_direct=$line
direct_run failing-direct "${long[@]}" --endpoints="$long_endpoints" \
  --fail_share="$fail_share" --warmup=1s --duration="$direct_duration"
fail_direct=$line

# 11. Pushes, on a staggerd of the push bench's own.
cleanup
say "push bench: $push_streams streams, $push_trials keys one at a time, then $mass_keys at once ..."
if ! "$bin/stagger-push-bench" --staggerd="$bin/staggerd" --streams="$push_streams" \
    --trials="$push_trials" --mass_keys="$mass_keys" --flush_interval="$flush" \
    >"$logs/push.out" 2>"$logs/push.err"; then
  cat "$logs/push.err" >&2
  die "stagger-push-bench failed (output in $logs/push.out)"
fi
push=$(grep '^result ' "$logs/push.out" | tail -n1)

# fields PREFIX LINE KEY...: " PREFIXKEY=value" for each KEY of LINE.
fields() {
  local prefix=$1 from=$2; shift 2
  for k in "$@"; do printf ' %s%s=%s' "$prefix" "$k" "$(field "$k" "$from")"; done
}
coordinator_keys=(achieved_per_sec calls_per_delivery coordinator_rpcs sync_in sync_out
  sync_in_per_agent_sec sync_out_per_delivery local_admit_share
  coordinator_cpu_us_per_delivery agent_cpu_us_per_delivery)
printf 'agent_bench agents=%s endpoints=%s threads=%s rate=%s lease_ttl=%s flush_interval=%s probe_timeout_ms=%s' \
  "$agents" "$endpoints" "$threads" "$rate" "$lease_ttl" "$flush" "$probe_timeout_ms"
fields "" "$calls_agents" "${coordinator_keys[@]}"
printf ' achieved_direct=%s direct_calls_per_delivery=%s direct_cpu_us_per_delivery=%s' \
  "$(field achieved_per_sec "$calls_direct")" "$(field calls_per_delivery "$calls_direct")" \
  "$(field coordinator_cpu_us_per_delivery "$calls_direct")"
printf ' coordinator_cpu_ratio=%s calls_warmup_s=%s' \
  "$(ratio "$(field coordinator_cpu_us_per_delivery "$calls_agents")" \
            "$(field coordinator_cpu_us_per_delivery "$calls_direct")")" \
  "$(field warmup_seconds "$calls_agents")"
printf ' lat_endpoints=%s capacity=%s moderate=%s light=%s lat_agent_p50_us=%s lat_agent_p99_us=%s lat_direct_p50_us=%s lat_direct_p99_us=%s' \
  "$lat_endpoints" "$capacity" "$moderate" "$light" "$a50" "$a99" "$d50" "$d99"
printf ' agent_latency_p50_ratio=%s agent_latency_p99_ratio=%s' "$(ratio "$a50" "$d50")" "$(ratio "$a99" "$d99")"
printf ' lat_one_agent_p50_us=%s lat_one_agent_p99_us=%s one_agent_latency_p50_ratio=%s one_agent_latency_p99_ratio=%s' \
  "$o50" "$o99" "$(ratio "$o50" "$d50")" "$(ratio "$o99" "$d99")"
fields victim_ "$victims" started_per_sec victims tripped stop_p50_ms stop_p99_ms \
  stop_max_ms open_report_p99_ms local_after_open answering_at_open probe_periods \
  probe_max_in_flight probe_max_per_period half_open_probes probe_overshoot
printf ' long_agents=%s long_endpoints=%s short_endpoints=%s long_rate=%s zipf=%s seed=%s fail_share=%s long_seconds=%s' \
  "$long_agents" "$long_endpoints" "$short_endpoints" "$long_rate" "$zipf" "$seed" \
  "$fail_share" "$(seconds "$long_duration")"
fields long_ "$long_line" "${coordinator_keys[@]}"
fields short_ "$short_line" "${coordinator_keys[@]}"
fields fail_ "$fail_line" "${coordinator_keys[@]}" failed retried retry_deferred gave_up \
  unfinished retry_wait_p50_ms retry_wait_p99_ms
fields long_direct_ "$long_direct" achieved_per_sec coordinator_cpu_us_per_delivery
fields fail_direct_ "$fail_direct" achieved_per_sec calls_per_delivery \
  coordinator_cpu_us_per_delivery failed retried retry_wait_p50_ms retry_wait_p99_ms
printf ' idle_seconds=%s idle_cpu_ms_per_sec=%s idle_cpu_us_per_long_delivery=%s' \
  "$idle_seconds" "$idle_cpu" "$(awk -v c="$idle_cpu" -v r="$long_rate" 'BEGIN { printf "%.2f", c * 1000 / r }')"
for p in long short; do
  l=${p}_line
  printf ' %s_cpu_ratio=%s' "$p" "$(ratio "$(field coordinator_cpu_us_per_delivery "${!l}")" \
    "$(field coordinator_cpu_us_per_delivery "$long_direct")")"
done
printf ' fail_cpu_ratio=%s' "$(ratio "$(field coordinator_cpu_us_per_delivery "$fail_line")" \
  "$(field coordinator_cpu_us_per_delivery "$fail_direct")")"
fields push_ "$push" streams trials readded
fields "" "$push" push_p50_ms push_p99_ms push_max_ms push_before_answer mass_keys \
  mass_report_ms mass_push_p50_ms mass_push_p99_ms mass_push_max_ms mass_bytes_per_stream \
  mass_bytes_per_stream_max mass_messages_per_stream mass_bytes_per_key
printf '\n'
