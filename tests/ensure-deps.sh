#!/usr/bin/env bash
# Installs what the test suite needs beyond the Rust toolchain, when missing, and says what it
# found. Debian packages through apt-get (as root, or with sudo); Python tools into a virtual
# environment under target/test-tools (nothing installed into the system Python); the stores'
# supported releases into the store cache, ${IDCAR_CACHE:-$HOME/.cache/idcar}/stores/, each
# made once (docs/compatibility.md#the-stores).
#
#   ZooKeeper 3.9, 3.8     zk/ensure-zookeeper.sh: jars   the lease's tests run real servers
#                          from Maven Central (mvn, Java)
#   etcd 3.6, 3.5          etcd/ensure-etcd.sh: built     the etcd store's tests run real members
#                          from Go modules (Go 1.26+)
#   kube-apiserver,        kube/ensure-kube.sh: built     the Kubernetes store's tests run a real
#   kubectl 1.37           from the k8s.io/kubernetes Go  API server (its etcd: the newest etcd
#                          module (Go 1.26+; ~15 min      above); the manifests are checked by it
#                          once); Prometheus Operator     (kubectl apply --dry-run=server), the
#                          CRDs from its Go module        monitoring CRDs registered first
#   promtool               Debian package prometheus      alert rules: check and unit tests; metrics lint
#   yamllint               Debian package yamllint        deploy/ and docker-compose.yml
#   setpriv                Debian package util-linux      the socket-permission test (other uids)
#   libfaketime            Debian package faketime        the frozen-clock test; the campaign's clock steps
#   ip, nft                iproute2, nftables             the fault campaign's namespaces and partitions
#   go, gcc, node, npm,    golang-go, gcc (go test -race), the client libraries' tests (clients/),
#   javac, mvn             nodejs, npm, default-jdk-headless, each the way its ecosystem runs them
#                          maven, junit5, libsurefire-java,  (mvn test offline: -o
#                          libmaven-{compiler,resources,jar}-plugin-java  -Dmaven.repo.local=/usr/share/maven-repo)
#   mypy, typescript       PyPI / npm, pinned, by the clients' own test scripts (clients/python/
#                          requirements-test.txt, clients/node/package-lock.json)
#   kubernetes-validate    PyPI, pinned, in the venv      manifests against Kubernetes schemas
#   protoc                 protobuf-compiler,             the generated etcd API regenerated and
#                          libprotobuf-dev                compared (crates/etcd-api/tests)
set -euo pipefail
cd "$(dirname "$0")/.."

apt_install() {
  local sudo=""
  if [ "$(id -u)" != 0 ]; then
    if command -v sudo >/dev/null 2>&1; then sudo="sudo"; else
      echo "missing: $*; installing needs root: run 'apt-get install $*' as root" >&2
      exit 1
    fi
  fi
  if ! command -v apt-get >/dev/null 2>&1; then
    echo "missing: $* (and no apt-get here): install them with your package manager" >&2
    exit 1
  fi
  echo "installing Debian packages: $*" >&2
  $sudo apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "$@" >&2
}

missing=()
command -v promtool >/dev/null 2>&1 || missing+=(prometheus)
command -v yamllint >/dev/null 2>&1 || missing+=(yamllint)
command -v setpriv >/dev/null 2>&1 || missing+=(util-linux)
command -v faketime >/dev/null 2>&1 || missing+=(faketime)
# Certificates for the ZooKeeper TLS tests (zk/tls-certs.sh).
command -v openssl >/dev/null 2>&1 || missing+=(openssl)
PATH="$PATH:/usr/sbin:/sbin" command -v ip >/dev/null 2>&1 || missing+=(iproute2)
PATH="$PATH:/usr/sbin:/sbin" command -v nft >/dev/null 2>&1 || missing+=(nftables)
command -v protoc >/dev/null 2>&1 || missing+=(protobuf-compiler)
[ -f /usr/include/google/protobuf/descriptor.proto ] || missing+=(libprotobuf-dev)
# A Go already on PATH is used as it is (etcd's modules need 1.26 or later).
command -v go >/dev/null 2>&1 || missing+=(golang-go)
command -v gcc >/dev/null 2>&1 || missing+=(gcc)
command -v node >/dev/null 2>&1 || missing+=(nodejs)
command -v npm >/dev/null 2>&1 || missing+=(npm)
command -v javac >/dev/null 2>&1 || missing+=(default-jdk-headless)
command -v mvn >/dev/null 2>&1 || missing+=(maven)
# The Java client's `mvn test` runs offline against Debian's Maven repository.
for pkg in junit5 libsurefire-java libmaven-compiler-plugin-java libmaven-resources-plugin-java \
  libmaven-jar-plugin-java; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'ok installed' || missing+=("$pkg")
done
command -v python3 >/dev/null 2>&1 || missing+=(python3)
python3 -c 'import venv, ensurepip' >/dev/null 2>&1 || missing+=(python3-venv)
if [ ${#missing[@]} -gt 0 ]; then
  apt_install "${missing[@]}"
fi
bash zk/ensure-zookeeper.sh
bash etcd/ensure-etcd.sh
bash kube/ensure-kube.sh
echo "promtool: $(promtool --version 2>&1 | head -1)"
echo "yamllint: $(yamllint --version)"
echo "go: $(go version)"
echo "node: $(node --version)"
echo "npm: $(npm --version)"
echo "javac: $(javac -version 2>&1)"
echo "mvn: $(mvn --version 2>&1 | head -1)"

venv=target/test-tools/venv
want_kv=1.37.0
if ! "$venv/bin/kubernetes-validate" --version 2>/dev/null | grep -q "$want_kv"; then
  echo "installing kubernetes-validate $want_kv into $venv" >&2
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check "kubernetes-validate==$want_kv" "PyYAML>=6,<7" >&2
fi
echo "kubernetes-validate: $("$venv/bin/kubernetes-validate" --version 2>&1)"
