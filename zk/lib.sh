# Shared by the zk/ scripts and the test harness: which ZooKeeper releases idcar supports,
# where their jars are kept, and how to start and probe a server.
#
# Each release's jars, with their runtime dependencies, are fetched from Maven Central by
# zk/ensure-zookeeper.sh into ${IDCAR_CACHE:-$HOME/.cache/idcar}/stores/zookeeper-VERSION/lib/.

# The supported releases, newest first: the newest is the default everywhere, the tests also
# run the store suites against the older one (docs/compatibility.md).
ZK_VERSIONS=(3.9.5 3.8.6)

# zk_version [WHICH]: the version WHICH names (newest, the default; older; or a listed
# version), or fails.
zk_version() {
  local which=${1:-newest} v
  case "$which" in
    newest) printf '%s\n' "${ZK_VERSIONS[0]}" ;;
    older) printf '%s\n' "${ZK_VERSIONS[1]}" ;;
    *)
      for v in "${ZK_VERSIONS[@]}"; do
        [ "$v" = "$which" ] && { printf '%s\n' "$v"; return 0; }
      done
      echo "zookeeper $which is not a supported release (${ZK_VERSIONS[*]})" >&2
      return 1
      ;;
  esac
}

# zk_home [WHICH]: the directory WHICH's jars are (or would be) kept in (its lib/).
zk_home() {
  local v
  v=$(zk_version "${1:-newest}") || return 1
  printf '%s\n' "${IDCAR_CACHE:-$HOME/.cache/idcar}/stores/zookeeper-$v"
}

# zk_classpath: prints the Java classpath for a ZooKeeper server, or fails: the release
# ZK_VERSION names (newest, older or a version); without ZK_VERSION, the jars of ZOOKEEPER_HOME
# (a release tarball's layout, lib/*.jar) when set, else the newest release.
zk_classpath() {
  local home jars
  if [ -z "${ZK_VERSION:-}" ] && [ -n "${ZOOKEEPER_HOME:-}" ]; then
    home=$ZOOKEEPER_HOME
  else
    home=$(zk_home "${ZK_VERSION:-newest}") || return 1
  fi
  command -v java >/dev/null 2>&1 || { echo "zookeeper: java not found" >&2; return 1; }
  jars=$(ls "$home"/lib/*.jar "$home"/*.jar 2>/dev/null | tr '\n' ':')
  if [ -z "$jars" ]; then
    echo "zookeeper: no jars in $home: run zk/ensure-zookeeper.sh (tests/ensure-deps.sh does)" >&2
    return 1
  fi
  printf '%s\n' "${jars%:}"
}

# zk_write_conf DIR CLIENT_PORT [SERVERS_LINES] [CLIENT_ADDRESS]: a test-friendly zoo.cfg and
# logback.xml (the server logs to DIR/zookeeper.log); clients connect on CLIENT_ADDRESS
# (default 127.0.0.1).
zk_write_conf() {
  local dir=$1 port=$2 servers=${3:-} addr=${4:-127.0.0.1}
  mkdir -p "$dir/data"
  cat >"$dir/zoo.cfg" <<CFG
tickTime=200
minSessionTimeout=400
maxSessionTimeout=30000
initLimit=20
syncLimit=5
dataDir=$dir/data
clientPort=$port
clientPortAddress=$addr
4lw.commands.whitelist=*
# All local contenders share 127.0.0.1; ZooKeeper's default allows 60 connections per IP.
maxClientCnxns=1000
admin.enableServer=false
extendedTypesEnabled=true
$servers
CFG
  cat >"$dir/logback.xml" <<LOG
<configuration>
  <appender name="F" class="ch.qos.logback.core.FileAppender">
    <file>$dir/zookeeper.log</file>
    <encoder><pattern>%d{ISO8601} %-5level [%thread] %logger{0}: %msg%n</pattern></encoder>
  </appender>
  <root level="INFO"><appender-ref ref="F"/></root>
</configuration>
LOG
}

# zk_tls_conf DIR SECURE_PORT CERTS [CLIENT_AUTH]: adds a TLS client port to DIR's zoo.cfg (Netty,
# PEM key and trust stores from CERTS made by zk/tls-certs.sh, client certificates mapped to x509
# identities). CLIENT_AUTH: need (default), want or none.
zk_tls_conf() {
  local dir=$1 port=$2 certs=$3 auth=${4:-need}
  cat >>"$dir/zoo.cfg" <<CFG
secureClientPort=$port
secureClientPortAddress=127.0.0.1
serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory
ssl.keyStore.location=$certs/server.pem
ssl.keyStore.type=PEM
ssl.trustStore.location=$certs/ca.pem
ssl.trustStore.type=PEM
ssl.clientAuth=$auth
authProvider.x509=org.apache.zookeeper.server.auth.X509AuthenticationProvider
CFG
}

# zk_start DIR: starts the server configured in DIR in the background (the release of
# zk_classpath); its pid goes to DIR/pid.
zk_start() {
  local dir=$1 cp
  cp=$(zk_classpath) || return 1
  nohup java -Xmx64m -Xms16m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 \
    -Dlogback.configurationFile="$dir/logback.xml" -cp "$cp" \
    org.apache.zookeeper.server.quorum.QuorumPeerMain "$dir/zoo.cfg" \
    >"$dir/stdout.log" 2>&1 &
  echo $! >"$dir/pid"
}

# zk_wait PORT [SECONDS]: waits until the server on PORT answers `srvr` with a Mode line.
zk_wait() {
  local port=$1 limit=${2:-20} i
  for ((i = 0; i < limit * 10; i++)); do
    # Each probe is bounded: a server still starting may accept and never answer.
    if out=$(timeout 2 bash -c "exec 3<>/dev/tcp/127.0.0.1/$port && printf srvr >&3 && cat <&3" 2>/dev/null) &&
      grep -q '^Mode:' <<<"$out"; then
      grep '^Mode:' <<<"$out"
      return 0
    fi
    sleep 0.1
  done
  echo "zookeeper on port $port did not start in ${limit}s" >&2
  return 1
}
