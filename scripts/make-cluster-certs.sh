#!/usr/bin/env bash
# Makes a private certificate authority (CA) and member certificates for an OxideLake
# cluster run with --tls-ca / --tls-cert / --tls-key (docs/cluster.md, "TLS").
#
#   scripts/make-cluster-certs.sh DIR                  DIR/ca.pem + DIR/ca.key (kept if present)
#   scripts/make-cluster-certs.sh DIR NAME [SAN ...]   DIR/NAME.pem + DIR/NAME.key, signed by DIR's CA
#
# SAN entries are DNS:<host name> or IP:<address>: every name and address peers use to
# reach this member (default: DNS:localhost IP:127.0.0.1). One certificate serves a
# member both as a server and as a client, so a scheduler, a worker and a client
# machine each get one. Keys are EC P-256, written 0600; certificates last 365 days.
# ca.key signs new members: keep it off the cluster's machines.
set -euo pipefail

usage() { sed -n '2,12p' "$0" >&2; exit 2; }
[ $# -ge 1 ] || usage
dir=$1; shift
command -v openssl >/dev/null || { echo "make-cluster-certs: openssl is needed (apt-get install openssl)" >&2; exit 1; }
mkdir -p "$dir"
umask 077

new_key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }

if [ ! -f "$dir/ca.pem" ]; then
  new_key "$dir/ca.key"
  openssl req -x509 -new -key "$dir/ca.key" -sha256 -days 365 \
    -subj "/CN=OxideLake cluster CA" \
    -addext "basicConstraints=critical,CA:TRUE" \
    -addext "keyUsage=critical,keyCertSign,cRLSign" \
    -out "$dir/ca.pem"
  chmod 0644 "$dir/ca.pem"
  echo "made $dir/ca.pem (and ca.key: keep it private)"
fi
[ $# -ge 1 ] || exit 0

name=$1; shift
case $name in
  */*|""|.*|-*) echo "make-cluster-certs: NAME must be a plain file name" >&2; exit 2;;
  ca) echo "make-cluster-certs: NAME 'ca' would replace the CA's own files" >&2; exit 2;;
esac
if [ ! -f "$dir/ca.key" ]; then
  echo "make-cluster-certs: $dir/ca.key is missing: the CA's key signs members" >&2; exit 1
fi
if [ -e "$dir/$name.key" ] || [ -e "$dir/$name.pem" ]; then
  echo "make-cluster-certs: $dir/$name.pem or .key exists; remove them to issue a new one" >&2; exit 1
fi
[ $# -ge 1 ] || set -- DNS:localhost IP:127.0.0.1
san=$(IFS=,; echo "$*")
ext=$(mktemp); csr=$(mktemp)
trap 'rm -f "$ext" "$csr"' EXIT
cat > "$ext" <<EXT
basicConstraints=critical,CA:FALSE
keyUsage=critical,digitalSignature
extendedKeyUsage=serverAuth,clientAuth
subjectAltName=$san
EXT
new_key "$dir/$name.key"
openssl req -new -key "$dir/$name.key" -subj "/CN=$name" -out "$csr"
openssl x509 -req -in "$csr" -CA "$dir/ca.pem" -CAkey "$dir/ca.key" \
  -set_serial "0x$(openssl rand -hex 16)" -days 365 -sha256 -extfile "$ext" \
  -out "$dir/$name.pem" 2> "$csr.err" || { cat "$csr.err" >&2; rm -f "$dir/$name.key" "$csr.err"; exit 1; }
rm -f "$csr.err"
chmod 0644 "$dir/$name.pem"
echo "made $dir/$name.pem and $dir/$name.key for $san"
