#!/usr/bin/env bash
# client.go_worker: docs/CLIENT.md's "Go" section as written works. With
# Debian 12's Go packages (GOPATH mode, no module proxy): the stubs are
# generated from proto/ with the system protoc and protoc-gen-go /
# protoc-gen-go-grpc, tests/client/go/worker builds against them, and runs
# one delivery through a real stagger-agent in front of a real staggerd:
# PROCEED (INITIAL_JITTER), then DONE (SUCCEEDED).
#
#   go_worker_test.sh SOURCE_DIR STAGGERD STAGGER_AGENT
set -euo pipefail
src=$1 staggerd=$2 agent=$3
work=$(mktemp -d /tmp/stagger-go-XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

export GOPATH=$work:/usr/share/gocode GO111MODULE=off GOFLAGS= GOCACHE=$work/cache
mkdir -p "$work/src/worker"
protoc -I "$src/proto" \
  --go_out="$work/src" --go_opt=Mstagger/v1/coordinator.proto=stagger/v1 \
  --go-grpc_out="$work/src" --go-grpc_opt=Mstagger/v1/coordinator.proto=stagger/v1 \
  "$src/proto/stagger/v1/coordinator.proto"
cp "$src/tests/client/go/worker/main.go" "$work/src/worker/"
(cd "$work/src/worker" && go build -o "$work/worker" .)

# A line from a child's stderr, waited for (30 s at most).
wait_for() {
  local file=$1 pattern=$2
  for _ in $(seq 300); do
    grep -qE "$pattern" "$file" 2>/dev/null && return 0
    sleep 0.1
  done
  echo "FAIL: no \"$pattern\" in $file:" >&2
  cat "$file" >&2
  return 1
}
"$staggerd" --address=127.0.0.1:0 --metrics_address= 2>"$work/staggerd.log" &
pids+=($!)
wait_for "$work/staggerd.log" "listening on 127.0.0.1:[0-9]+"
port=$(grep -oE "listening on 127.0.0.1:[0-9]+" "$work/staggerd.log" | cut -d: -f2)
"$agent" --listen="unix:$work/agent.sock" --coordinator="127.0.0.1:$port" \
  --metrics_address= 2>"$work/agent.log" &
pids+=($!)
wait_for "$work/agent.log" "listening on unix:"

out=$("$work/worker" "$work/agent.sock")
echo "$out"
if [ "$out" != $'PROCEED INITIAL_JITTER 2\nDONE SUCCEEDED' ]; then
  echo "FAIL: expected PROCEED INITIAL_JITTER (token 2), then DONE SUCCEEDED" >&2
  exit 1
fi
echo "OK: a Go worker on the generated stubs delivered through the agent"
