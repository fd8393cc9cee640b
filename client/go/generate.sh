#!/usr/bin/env bash
# Regenerates v1 (the stagger.v1 messages and the RetryCoordinator
# stub) from proto/stagger/v1/coordinator.proto with Debian 12's protoc,
# protoc-gen-go (1.28.1) and protoc-gen-go-grpc (1.0). They are committed so
# that the module builds from source alone, as Go modules do; the test
# client.go.generated regenerates them and fails if they differ.
#   client/go/generate.sh [OUT_DIR]   default: client/go itself
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out=${1:-$here}
module=stagger.dev/stagger
map=Mstagger/v1/coordinator.proto=$module/v1
mkdir -p "$out/v1"
protoc -I "$root/proto" \
  --go_out="$out" --go_opt="module=$module" --go_opt="$map" \
  --go-grpc_out="$out" --go-grpc_opt="module=$module" --go-grpc_opt="$map" \
  "$root/proto/stagger/v1/coordinator.proto"
