#!/usr/bin/env bash
# client.go.vet: the Go code is gofmt's and go vet's: the module
# (client/go), its conformance runner and the workers built on it, vetted in
# GOPATH mode against Debian's Go packages (client/go/gopath.sh).
#   go_vet_test.sh SOURCE_DIR GO_WORKSPACE
set -euo pipefail
src=$1 ws=$2
dirs=("$src/client/go" "$src/tests/conformance/go" "$src/examples/go/worker"
      "$src/examples/go/http_worker")
unformatted=$(gofmt -l "${dirs[@]}")
if [ -n "$unformatted" ]; then
  echo "FAIL: not gofmt-formatted (run gofmt -w):"; echo "$unformatted"; exit 1
fi
"$src/client/go/gopath.sh" "$ws" \
  --link "stagger.dev/conformance=$src/tests/conformance/go" \
  --link "stagger.dev/worker=$src/examples/go/worker" \
  --link "stagger.dev/e2eworker=$src/examples/go/http_worker" -- \
  go vet stagger.dev/stagger stagger.dev/stagger/v1 stagger.dev/conformance \
  stagger.dev/worker stagger.dev/e2eworker
echo "OK: gofmt and go vet"
