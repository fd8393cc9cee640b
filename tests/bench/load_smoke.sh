#!/usr/bin/env bash
# Bench smoke test: starts a server on a free loopback port, runs one short
# stagger-load against it, stops the server. Passes iff stagger-load exits 0,
# i.e. it measured at least one decision and saw no RPC error and no
# malformed response. No timing is asserted.
#   load_smoke.sh SERVER [SERVER_ARGS...] -- STAGGER_LOAD [LOAD_ARGS...]
# The server must print "listening on HOST:PORT" on stderr when ready and
# accept --address=127.0.0.1:0 (staggerd and stagger-noop-server do).
set -euo pipefail
server=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do server+=("$1"); shift; done
[ $# -gt 1 ] || { echo "usage: $0 SERVER [ARGS...] -- LOAD [ARGS...]" >&2; exit 2; }
shift
load=("$@")

err=$(mktemp)
"${server[@]}" --address=127.0.0.1:0 2>"$err" &
pid=$!
trap 'kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; rm -f "$err"' EXIT

port=
for _ in $(seq 1 300); do
  port=$(sed -n 's/.*listening on [^ ]*:\([0-9][0-9]*\).*/\1/p' "$err" | head -n1)
  [ -n "$port" ] && break
  if ! kill -0 "$pid" 2>/dev/null; then
    echo "server exited before listening:" >&2; cat "$err" >&2; exit 1
  fi
  sleep 0.1
done
[ -n "$port" ] || { echo "server did not report a port" >&2; cat "$err" >&2; exit 1; }

"${load[@]}" --target="127.0.0.1:$port"
