#!/usr/bin/env bash
# Runs a go command on this module offline, in GOPATH mode, against
# Debian 12's Go packages in /usr/share/gocode (golang-google-grpc-dev,
# golang-google-protobuf-dev, ...): no module proxy needed.
#
#   client/go/gopath.sh WORKSPACE [--link IMPORT_PATH=DIR]... -- go ARGS...
#
# WORKSPACE is a folder of its own (created if missing): the module is
# linked into it as $WORKSPACE/src/stagger.dev/stagger, each --link as
# $WORKSPACE/src/IMPORT_PATH, and GOPATH is $WORKSPACE:/usr/share/gocode
# with GO111MODULE=off; GOCACHE is $WORKSPACE/cache unless set. Example:
#   client/go/gopath.sh build/go -- go test stagger.dev/stagger
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
[ $# -ge 3 ] || { sed -n '2,12p' "$0" >&2; exit 2; }
ws=$1
shift
mkdir -p "$ws/src/stagger.dev"
ws=$(cd "$ws" && pwd)
link() {  # IMPORT_PATH DIR
  mkdir -p "$(dirname "$ws/src/$1")"
  ln -sfn "$2" "$ws/src/$1"
}
link stagger.dev/stagger "$here"
while [ "${1:-}" = --link ]; do
  link "${2%%=*}" "$(cd "${2#*=}" && pwd)"
  shift 2
done
[ "${1:-}" = -- ] || { echo "gopath.sh: expected -- before the command" >&2; exit 2; }
shift
export GOPATH=$ws:/usr/share/gocode GO111MODULE=off GOFLAGS= GOPROXY=off
export GOCACHE=${GOCACHE:-$ws/cache}
cd "$ws/src"
exec "$@"
