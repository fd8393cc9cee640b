#!/usr/bin/env bash
# client.node.package: @stagger/client installs as a user installs it.
# From a copy of client/node outside the repository, `npm pack` builds it
# (prepack: the stubs, tsc, the LICENSE) into a tarball that holds dist/
# with its type declarations and nothing of the sources or tests; a scratch
# project installs the tarball, compiles a worker against it with
# tsc --strict (tests/client/node/package/worker.ts) and runs it: three
# POSTs through a real staggerd to a receiver on loopback.
#   package_test.sh SOURCE_DIR STAGGERD
set -euo pipefail
src=$1 staggerd=$2
work=$(mktemp -d /tmp/stagger-npm-XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
npm_flags=(--no-audit --no-fund --loglevel=error --prefer-offline)

# The package, packed from a copy (proto/ and LICENSE where it finds them).
mkdir -p "$work/repo/client"
tar -C "$src/client" --exclude=node/node_modules --exclude=node/dist \
  --exclude=node/src/gen --exclude=node/LICENSE -cf - node | tar -C "$work/repo/client" -xf -
ln -s "$src/client/node/node_modules" "$work/repo/client/node/node_modules"
ln -s "$src/proto" "$work/repo/proto"
cp "$src/LICENSE" "$work/repo/LICENSE"
(cd "$work/repo/client/node" && npm pack --pack-destination "$work" "${npm_flags[@]}" >/dev/null)
tarball=$(ls "$work"/stagger-client-*.tgz)
contents=$(tar -tzf "$tarball")
for f in package/package.json package/README.md package/LICENSE \
         package/dist/index.js package/dist/index.d.ts \
         package/dist/delivery_loop.d.ts package/dist/gen/stagger/v1/coordinator.js; do
  grep -qx "$f" <<<"$contents" || { echo "FAIL: $f not in $tarball"; exit 1; }
done
if grep -qE '^package/(src|tests?)/|\.test\.' <<<"$contents"; then
  echo "FAIL: sources or tests packed:"; grep -E '^package/(src|tests?)/' <<<"$contents"; exit 1
fi
tar -xzOf "$tarball" package/package.json | grep -q '"license": "Apache-2.0"' ||
  { echo "FAIL: the packed package.json's license is not Apache-2.0"; exit 1; }

# A scratch project: the tarball, TypeScript and Node's types.
mkdir -p "$work/app"
cp "$src/tests/client/node/package/worker.ts" "$work/app/"
(cd "$work/app" &&
 echo '{"name": "scratch", "version": "1.0.0", "private": true}' > package.json &&
 npm install "${npm_flags[@]}" "$tarball" typescript@5.9.3 @types/node@20.19.43 >/dev/null &&
 node_modules/.bin/tsc --strict --target ES2022 --module node16 --types node worker.ts)

# A staggerd and a receiver, then the worker.
wait_for() {
  local file=$1 pattern=$2
  for _ in $(seq 600); do
    grep -qE "$pattern" "$file" 2>/dev/null && return 0
    sleep 0.1
  done
  echo "FAIL: no \"$pattern\" in $file:" >&2; cat "$file" >&2; return 1
}
"$staggerd" --address=127.0.0.1:0 --metrics_address= 2>"$work/staggerd.log" &
pids+=($!)
wait_for "$work/staggerd.log" "listening on 127.0.0.1:[0-9]+"
port=$(grep -oE "listening on 127.0.0.1:[0-9]+" "$work/staggerd.log" | cut -d: -f2)
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
out=$(cd "$work/app" && node worker.js "127.0.0.1:$port" "http://127.0.0.1:$rport/hooks" 3)
echo "$out"
grep -q "^@stagger/client from $work/app/node_modules/@stagger/client/" <<<"$out" ||
  { echo "FAIL: the worker did not load the installed package"; exit 1; }
[ "$(grep -c '^end succeeded 1$' <<<"$out")" = 3 ] ||
  { echo "FAIL: expected three deliveries to succeed"; exit 1; }
echo "OK: the packed @stagger/client installed, compiled under tsc --strict and delivered"
