#!/usr/bin/env bash
# client.go.module: client/go is the module it says it is.
#   * its generated stubs (client/go/v1) are what client/go/generate.sh
#     makes from proto/ now (one source: the proto);
#   * its go.mod names the grpc and protobuf versions Debian 12 ships
#     (what CI builds it against, client/go/README.md);
#   * its license field is the repository's: go.mod has none, so the
#     module's LICENSE is the root one (Apache-2.0), which must exist.
# Then, as its self-test, a stale stub and a wrong version must be caught.
#   go_module_test.sh SOURCE_DIR
set -euo pipefail
src=$1
work=$(mktemp -d /tmp/stagger-go-module-XXXXXX)
trap 'rm -rf "$work"' EXIT
fail=0

check_stubs() {  # MODULE_DIR
  rm -rf "$work/gen" && mkdir -p "$work/gen"
  "$src/client/go/generate.sh" "$work/gen"
  diff -r "$work/gen/v1" "$1/v1" >/dev/null
}
deb_version() {  # PACKAGE -> 1.33.3
  dpkg-query -W -f='${Version}' "$1" | sed -E 's/^[0-9]+://; s/[-+~].*$//'
}
check_versions() {  # GO_MOD
  local grpc proto
  grpc=$(deb_version golang-google-grpc-dev)
  proto=$(deb_version golang-google-protobuf-dev)
  grep -qE "^\s*google.golang.org/grpc v$grpc\$" "$1" &&
    grep -qE "^\s*google.golang.org/protobuf v$proto\$" "$1"
}

if ! check_stubs "$src/client/go"; then
  echo "FAIL: client/go/v1 is not what client/go/generate.sh makes from proto/: run it"
  fail=1
fi
if ! check_versions "$src/client/go/go.mod"; then
  echo "FAIL: client/go/go.mod does not name Debian's grpc ($(deb_version golang-google-grpc-dev)) and protobuf ($(deb_version golang-google-protobuf-dev))"
  fail=1
fi
if ! grep -q "Apache License" "$src/LICENSE" 2>/dev/null ||
   ! grep -q "Version 2.0" "$src/LICENSE"; then
  echo "FAIL: no Apache-2.0 LICENSE at the repository's root"
  fail=1
fi

# Self-test: a planted stale stub and a planted wrong version are caught.
mkdir -p "$work/planted"
cp -r "$src/client/go/v1" "$work/planted/"
echo "// stale" >> "$work/planted/v1/coordinator.pb.go"
sed 's/google.golang.org\/grpc v[0-9.]*/google.golang.org\/grpc v1.99.0/' \
  "$src/client/go/go.mod" > "$work/planted/go.mod"
if check_stubs "$work/planted"; then
  echo "FAIL: self-test: a stale stub was not caught"; fail=1
fi
if check_versions "$work/planted/go.mod"; then
  echo "FAIL: self-test: a wrong grpc version was not caught"; fail=1
fi
[ "$fail" = 0 ] && echo "OK: stubs current, go.mod on Debian's grpc and protobuf, Apache-2.0"
exit "$fail"
