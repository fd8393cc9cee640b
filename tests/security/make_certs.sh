#!/usr/bin/env bash
# Makes the certificates the security tests use, with openssl, in DIR:
#   ca.pem/ca.key          the test CA
#   other-ca.pem           another CA (its clients must be refused)
#   server.pem/.key        CN=staggerd-v1, SANs DNS:localhost, DNS:stagger.test, IP:127.0.0.1
#   server-v2.pem/.key     the same names, CN=staggerd-v2 (for rotation)
#   worker.pem/.key        URI SAN spiffe://stagger.test/worker
#   agent.pem/.key         URI SAN spiffe://stagger.test/agent (the agents role)
#   agent-b.pem/.key       URI SAN spiffe://stagger.test/agent-b (another agent)
#   reader.pem/.key        DNS SAN reader.stagger.test
#   admin.pem/.key         URI SAN spiffe://stagger.test/admin
#   rogue.pem/.key         URI SAN spiffe://stagger.test/admin, signed by other-ca
# EC P-256 keys, valid 2 days. Usage: make_certs.sh DIR
set -euo pipefail
[ $# -eq 1 ] || { echo "usage: $0 DIR" >&2; exit 2; }
dir=$1
mkdir -p "$dir"
cd "$dir"
export OPENSSL_CONF=/dev/null  # no host config: the same certificates everywhere

ca() {  # NAME CN
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
    -keyout "$1.key" -out "$1.pem" -days 2 -subj "/O=Stagger test/CN=$2" \
    -addext "basicConstraints=critical,CA:TRUE" \
    -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
}
leaf() {  # NAME CA CN SAN EKU
  openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
    -keyout "$1.key" -out "$1.csr" -subj "/O=Stagger test/CN=$3" 2>/dev/null
  printf 'subjectAltName=%s\nextendedKeyUsage=%s\nbasicConstraints=CA:FALSE\n' \
    "$4" "$5" > "$1.ext"
  openssl x509 -req -in "$1.csr" -CA "$2.pem" -CAkey "$2.key" \
    -CAcreateserial -out "$1.pem" -days 2 -extfile "$1.ext" 2>/dev/null
  rm -f "$1.csr" "$1.ext"
}

ca ca "Stagger test CA"
ca other-ca "Another CA"
server_sans="DNS:localhost,DNS:stagger.test,IP:127.0.0.1"
leaf server ca staggerd-v1 "$server_sans" serverAuth
leaf server-v2 ca staggerd-v2 "$server_sans" serverAuth
leaf worker ca worker "URI:spiffe://stagger.test/worker" clientAuth
leaf agent ca agent "URI:spiffe://stagger.test/agent" clientAuth
leaf agent-b ca agent-b "URI:spiffe://stagger.test/agent-b" clientAuth
leaf reader ca reader "DNS:reader.stagger.test" clientAuth
leaf admin ca admin "URI:spiffe://stagger.test/admin" clientAuth
leaf rogue other-ca admin "URI:spiffe://stagger.test/admin" clientAuth
