#!/usr/bin/env bash
# Makes the two Secrets the example's TLS needs, with a throwaway CA (openssl, zk/tls-certs.sh):
#   deploy/kubernetes/tls-secrets.sh [NAMESPACE]
# zk-tls         ZooKeeper's server certificate for zk-N.zk-hs (and the namespaced names) + the CA
# idcar-zk-tls   idcar's client certificate (CN=idcar: the x509 identity that owns the pool) + the CA
# Both in the layout cert-manager writes (ca.crt, tls.crt, tls.key), so cert-manager can issue
# them instead (docs/kubernetes.md, "ZooKeeper over TLS"). Rotate by running it again and
# restarting ZooKeeper; idcar picks up its new files without a restart.
set -euo pipefail
ns=${1:-default}
here=$(cd "$(dirname "$0")" && pwd)
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
# Each server by the name idcar dials (a wildcard needs two labels after it: *.zk-hs would not
# match zk-0.zk-hs), and the namespaced names by wildcard.
SERVER_SAN="DNS:zk-0.zk-hs,DNS:zk-1.zk-hs,DNS:zk-2.zk-hs,DNS:*.zk-hs.$ns.svc,DNS:*.zk-hs.$ns.svc.cluster.local" \
  bash "$here/../../zk/tls-certs.sh" "$dir" idcar
secret() {
  kubectl -n "$ns" create secret generic "$1" --from-file=ca.crt="$dir/ca.pem" \
    --from-file=tls.crt="$dir/$2" --from-file=tls.key="$dir/$3" \
    --dry-run=client -o yaml | kubectl apply -f -
}
secret zk-tls server.crt server-key.pem
secret idcar-zk-tls client.pem client-key.pem
