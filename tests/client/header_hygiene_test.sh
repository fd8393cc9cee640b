#!/usr/bin/env bash
# The client's public headers hide the server (issue 10, part 2): a worker
# that includes them must not pull in gRPC, prometheus-cpp, protobuf, the
# generated stub, the engine itself or the client's own internals. Abseil
# and the engine's value types (decision.h, engine_config.h, clock.h,
# random.h) are allowed.
#
# Abseil, gRPC and prometheus-cpp all live in /usr/include here, so a
# narrowed include path cannot tell them apart; instead this asks the
# compiler for each header's full transitive include list (-M, -MG so that
# absent generated headers are listed too) and refuses any forbidden path.
# It first checks itself on an internal header (client/replica.h) that does
# include gRPC and the stub: a scan that finds nothing there is broken.
#
#   header_hygiene_test.sh CXX SOURCE_DIR
set -euo pipefail
cxx=$1
src=$2
forbidden='(^|/)(grpcpp|grpc|prometheus|google/protobuf|stagger/v1)/|server/engine/engine\.h|server/(service|metrics|config)/|client/(client_metrics|replica)\.h'
public=(client/coordinator_client.h client/retry_loop.h client/http_outcome.h
        client/wait.h client/members.h)

# The transitive include list of one header, one path per line.
includes() {
  "$cxx" -std=c++17 -x c++ -M -MG -I"$src" "$src/$1" |
    sed -e 's/\\$//' | tr ' ' '\n' | sed -e '/^$/d' -e '/:$/d'
}

self=$(includes client/replica.h)
if ! grep -Eq "$forbidden" <<<"$self"; then
  echo "FAIL: the scan found no forbidden include in client/replica.h," \
       "which includes grpcpp and the stub: the check is broken" >&2
  exit 1
fi

status=0
for h in "${public[@]}"; do
  list=$(includes "$h")
  bad=$(grep -E "$forbidden" <<<"$list" || true)
  if [ -n "$bad" ]; then
    echo "FAIL: $h pulls in:" >&2
    echo "$bad" | sed 's/^/  /' >&2
    status=1
  fi
  # Each public header also compiles on its own with only the source tree
  # and the system include path.
  if ! echo "#include \"$h\"" |
       "$cxx" -std=c++17 -x c++ -fsyntax-only -I"$src" - ; then
    echo "FAIL: $h does not compile on its own" >&2
    status=1
  fi
done
[ $status -eq 0 ] && echo "OK: ${public[*]} include only Abseil and the value types"
exit $status
