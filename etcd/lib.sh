# Shared by the etcd/ scripts and the test harness: which etcd releases idcar supports and
# where their builds are kept.
#
# Each release is built from its Go modules by etcd/ensure-etcd.sh into
# ${IDCAR_CACHE:-$HOME/.cache/idcar}/stores/etcd-VERSION/bin/ (etcd, etcdctl).

# The supported releases, newest first: the newest is the default everywhere, the tests also
# run the store suites against the older one (docs/compatibility.md).
ETCD_VERSIONS=(3.6.16 3.5.35)

# etcd_version [WHICH]: the version WHICH names (newest, the default; older; or a listed
# version), or fails.
etcd_version() {
  local which=${1:-newest} v
  case "$which" in
    newest) printf '%s\n' "${ETCD_VERSIONS[0]}" ;;
    older) printf '%s\n' "${ETCD_VERSIONS[1]}" ;;
    *)
      for v in "${ETCD_VERSIONS[@]}"; do
        [ "$v" = "$which" ] && { printf '%s\n' "$v"; return 0; }
      done
      echo "etcd $which is not a supported release (${ETCD_VERSIONS[*]})" >&2
      return 1
      ;;
  esac
}

# etcd_home [WHICH]: the directory WHICH's build is (or would be) kept in.
etcd_home() {
  local v
  v=$(etcd_version "${1:-newest}") || return 1
  printf '%s\n' "${IDCAR_CACHE:-$HOME/.cache/idcar}/stores/etcd-$v"
}

# etcd_bin NAME [WHICH]: the path of NAME (etcd, etcdctl) of WHICH's build, or fails saying how
# to build it.
etcd_bin() {
  local home
  home=$(etcd_home "${2:-newest}") || return 1
  if [ ! -x "$home/bin/$1" ]; then
    echo "etcd ${2:-newest}: $home/bin/$1 not built: run etcd/ensure-etcd.sh (tests/ensure-deps.sh does)" >&2
    return 1
  fi
  printf '%s\n' "$home/bin/$1"
}
