#!/usr/bin/env bash
# Makes a throwaway certificate authority and certificates for ZooKeeper over TLS, with openssl:
#   zk/tls-certs.sh DIR [CLIENT_CN]
# DIR/ca.pem, ca-key.pem                  the authority (trust anchor for both sides)
# DIR/server.pem (certificate + key)      ZooKeeper's: SAN IP:127.0.0.1, DNS:localhost (or $SERVER_SAN),
#   valid for $SERVER_DAYS days (default 825; 0: expired a second after it is made);
#   also as server.crt and server-key.pem (for a Kubernetes TLS Secret)
# DIR/client.pem, client-key.pem          idcar's client certificate (CN=CLIENT_CN, default idcar)
# Running it again on DIR rotates everything (a new authority too).
# For tests and local runs; in production use your own CA or cert-manager (docs/zookeeper.md).
set -euo pipefail
dir=${1:?usage: zk/tls-certs.sh DIR [CLIENT_CN]}
cn=${2:-idcar}
mkdir -p "$dir"
cd "$dir"
key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }
key ca-key.pem
openssl req -x509 -new -key ca-key.pem -sha256 -days 3650 -subj "/O=idcar test/CN=idcar test CA" \
  -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
  -out ca.pem 2>/dev/null
# sign NAME SUBJECT EXTENSIONS [DAYS]: NAME.crt from NAME-key.pem, signed by the CA.
sign() {
  openssl req -new -key "$1-key.pem" -subj "$2" -out "$1.csr" 2>/dev/null
  openssl x509 -req -in "$1.csr" -CA ca.pem -CAkey ca-key.pem -CAcreateserial -days "${4:-825}" -sha256 \
    -extfile <(printf '%s\n' "$3") -out "$1.crt" 2>/dev/null
  rm -f "$1.csr"
}
key server-key.pem
sign server "/O=idcar test/CN=zookeeper" \
  "subjectAltName=${SERVER_SAN:-IP:127.0.0.1,DNS:localhost}
extendedKeyUsage=serverAuth,clientAuth" "${SERVER_DAYS:-825}"
cat server.crt server-key.pem >server.pem
key client-key.pem
sign client "/O=idcar test/CN=$cn" "extendedKeyUsage=clientAuth"
mv client.crt client.pem
rm -f ca.srl
chmod 600 ./*-key.pem server.pem
