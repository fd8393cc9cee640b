#!/usr/bin/env bash
# stagger-load against three staggerd replicas (stagger-0..2 on free loopback
# ports, each told the member list): --target takes the replica list, every
# call and batch goes to its keys' owner, so no replica counts a misrouted
# request, and each replica got some keys. No timing is asserted.
#   load_sharded.sh STAGGERD STAGGER_LOAD [LOAD_ARGS...]
set -euo pipefail
staggerd=$1
load=$2
shift 2

dir=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$dir"
}
trap cleanup EXIT

for i in 0 1 2; do
  "$staggerd" --address=127.0.0.1:0 --metrics_address=127.0.0.1:0 \
    --replicas=stagger-0,stagger-1,stagger-2 --replica_name=stagger-$i \
    2>"$dir/$i.err" &
  pids+=($!)
done

grpc=() metrics=()
for i in 0 1 2; do
  line=
  for _ in $(seq 1 300); do
    line=$(grep -m1 'listening on' "$dir/$i.err" || true)
    [ -n "$line" ] && break
    kill -0 "${pids[$i]}" 2>/dev/null ||
      { echo "stagger-$i exited:" >&2; cat "$dir/$i.err" >&2; exit 1; }
    sleep 0.1
  done
  [ -n "$line" ] || { echo "stagger-$i did not start" >&2; exit 1; }
  grpc+=("$(sed -n 's/.*listening on [^ ]*:\([0-9]*\) .*/\1/p' <<<"$line")")
  metrics+=("$(sed -n 's/.*metrics on port \([0-9]*\).*/\1/p' <<<"$line")")
done

target="stagger-0=127.0.0.1:${grpc[0]},stagger-1=127.0.0.1:${grpc[1]}"
target+=",stagger-2=127.0.0.1:${grpc[2]}"
"$load" --target="$target" "$@"

status=0
for i in 0 1 2; do
  body=$(curl -sf "http://127.0.0.1:${metrics[$i]}/metrics")
  misrouted=$(awk '$1 == "stagger_misrouted_requests_total" {print $2}' <<<"$body")
  tracked=$(awk '$1 == "stagger_endpoints_tracked" {print $2}' <<<"$body")
  echo "stagger-$i: tracked=$tracked misrouted=$misrouted"
  if [ "$misrouted" != "0" ]; then
    echo "FAIL: stagger-$i counted $misrouted misrouted requests" >&2
    status=1
  fi
  if [ -z "$tracked" ] || [ "$tracked" = "0" ]; then
    echo "FAIL: stagger-$i got no keys" >&2
    status=1
  fi
done
exit $status
