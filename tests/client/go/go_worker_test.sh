#!/usr/bin/env bash
# client.go.worker: a Go worker built on the stagger module from outside
# the repository delivers through a real stagger-agent in front of a real
# staggerd. examples/go/worker/main.go is copied to a scratch folder,
# built there in GOPATH mode against client/go and Debian's Go packages
# (client/go/gopath.sh), and run: three HTTP POSTs to a loopback receiver,
# each a RetryLoop run that must end SUCCEEDED.
#   go_worker_test.sh SOURCE_DIR STAGGERD STAGGER_AGENT GO_WORKSPACE
set -euo pipefail
src=$1 staggerd=$2 agent=$3 ws=$4
work=$(mktemp -d /tmp/stagger-go-worker-XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

mkdir -p "$work/worker"
cp "$src/examples/go/worker/main.go" "$work/worker/"
"$src/client/go/gopath.sh" "$ws" --link "stagger.dev/worker-$$=$work/worker" -- \
  go build -o "$work/worker-bin" "stagger.dev/worker-$$"
rm -f "$ws/src/stagger.dev/worker-$$"

# A line from a child's stderr, waited for (60 s at most).
wait_for() {
  local file=$1 pattern=$2
  for _ in $(seq 600); do
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
/usr/bin/python3 -c '
import http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.send_response(200); self.end_headers()
    def log_message(self, *a): pass
s = http.server.HTTPServer(("127.0.0.1", 0), H)
print("listening on 127.0.0.1:%d" % s.server_port, file=sys.stderr, flush=True)
s.serve_forever()' 2>"$work/receiver.log" &
pids+=($!)
wait_for "$work/receiver.log" "listening on 127.0.0.1:[0-9]+"
rport=$(grep -oE "[0-9]+$" "$work/receiver.log")

out=$("$work/worker-bin" -target "unix:$work/agent.sock" \
  -url "http://127.0.0.1:$rport/hooks" -deliveries 3)
echo "$out"
if [ "$(grep -c '^end SUCCEEDED 1$' <<<"$out")" != 3 ]; then
  echo "FAIL: expected three deliveries to end SUCCEEDED after one attempt" >&2
  exit 1
fi
echo "OK: a Go worker built outside the repository delivered through the agent"
