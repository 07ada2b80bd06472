#!/usr/bin/env bash
# Makes sure the supported etcd releases are built: prints where it found each, or builds the
# missing ones from their Go modules (etcd and etcdctl, with the Go on PATH; GOTOOLCHAIN=local,
# so a Go too old for a release fails here rather than fetching another toolchain).
#
#   etcd/ensure-etcd.sh [WHICH...]   newest, older or a listed version (default: every one)
#
# Builds go to ${IDCAR_CACHE:-$HOME/.cache/idcar}/stores/etcd-VERSION/bin/ (etcd/lib.sh), made
# whole in a temporary directory beside it and moved into place, so an interrupted build leaves
# nothing that looks built. Go's own module and build caches stay where Go keeps them.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=etcd/lib.sh
. "$here/lib.sh"

[ $# -gt 0 ] || set -- "${ETCD_VERSIONS[@]}"

tmp=""
trap 'rm -rf "$tmp"' EXIT

build() {
  local v=$1 home=$2 start=$SECONDS got
  if ! command -v go >/dev/null 2>&1; then
    echo "etcd $v: building it needs Go on PATH (tests/ensure-deps.sh installs Debian's golang-go when none is)" >&2
    return 1
  fi
  echo "etcd $v: not built; building etcd and etcdctl from their Go modules with $(go version | cut -d' ' -f3) (a few minutes)" >&2
  tmp=$(mktemp -d "$(dirname "$home")/.etcd-$v.XXXXXX")
  mkdir -p "$tmp/src" "$tmp/bin"
  if ! (
    cd "$tmp/src"
    export GOTOOLCHAIN=local GOFLAGS=-mod=mod CGO_ENABLED=0
    # A throwaway module that requires the release's modules: `go install module@version`
    # refuses modules whose go.mod has replace directives, as etcd's have.
    # (In a condition, `set -e` does not apply: each step is chained.)
    go mod init idcar.invalid/etcd-build &&
      go get "go.etcd.io/etcd/server/v3@v$v" "go.etcd.io/etcd/etcdctl/v3@v$v" &&
      go build -trimpath -ldflags=-s -o "$tmp/bin/etcd" go.etcd.io/etcd/server/v3 &&
      go build -trimpath -ldflags=-s -o "$tmp/bin/etcdctl" go.etcd.io/etcd/etcdctl/v3
  ) >"$tmp/build.log" 2>&1; then
    cat "$tmp/build.log" >&2
    return 1
  fi
  got=$("$tmp/bin/etcd" --version | sed -n 's/^etcd Version: //p')
  if [ "$got" != "$v" ]; then
    echo "etcd $v: the build says it is '$got'" >&2
    return 1
  fi
  rm -rf "$tmp/src" "$tmp/build.log"
  rm -rf "$home"
  mv "$tmp" "$home"
  tmp=""
  echo "etcd $v: built in $((SECONDS - start))s" >&2
}

for which in "$@"; do
  v=$(etcd_version "$which")
  home=$(etcd_home "$v")
  mkdir -p "$(dirname "$home")"
  # One build of a release at a time, whoever runs this.
  exec 9>"$(dirname "$home")/.etcd-$v.lock"
  flock 9
  if [ ! -x "$home/bin/etcd" ] || [ ! -x "$home/bin/etcdctl" ]; then
    build "$v" "$home"
  fi
  exec 9>&-
  echo "etcd $v: $home/bin ($("$home/bin/etcd" --version | sed -n 's/^Go Version: //p'))"
done
