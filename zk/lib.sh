# Shared by the zk/ scripts: where ZooKeeper's jars are, and how to start and probe a server.

# Prints the Java classpath for a ZooKeeper server, or fails.
zk_classpath() {
  if [ -n "${ZOOKEEPER_HOME:-}" ]; then
    local jars
    jars=$(ls "$ZOOKEEPER_HOME"/lib/*.jar "$ZOOKEEPER_HOME"/*.jar 2>/dev/null | tr '\n' ':')
    [ -n "$jars" ] || return 1
    printf '%s\n' "${jars%:}"
    return 0
  fi
  [ -f /usr/share/java/zookeeper.jar ] && command -v java >/dev/null 2>&1 || return 1
  local cp=/usr/share/java/zookeeper.jar
  # Netty (Debian's libnetty-java, a dependency of libzookeeper-java) for the TLS port.
  for j in slf4j-log4j12.jar log4j-1.2.jar netty-buffer.jar netty-codec.jar netty-common.jar \
    netty-handler.jar netty-resolver.jar netty-transport.jar netty-transport-native-epoll.jar \
    netty-transport-native-unix-common.jar; do
    [ -f "/usr/share/java/$j" ] && cp="$cp:/usr/share/java/$j"
  done
  printf '%s\n' "$cp"
}

# zk_write_conf DIR CLIENT_PORT [SERVERS_LINES] [CLIENT_ADDRESS]: a test-friendly zoo.cfg and
# log4j.properties; clients connect on CLIENT_ADDRESS (default 127.0.0.1).
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
  cat >"$dir/log4j.properties" <<LOG
log4j.rootLogger=INFO, F
log4j.appender.F=org.apache.log4j.FileAppender
log4j.appender.F.File=$dir/zookeeper.log
log4j.appender.F.layout=org.apache.log4j.PatternLayout
log4j.appender.F.layout.ConversionPattern=%d{ISO8601} %-5p [%t] %c{1}: %m%n
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

# zk_start DIR: starts the server configured in DIR in the background; its pid goes to DIR/pid.
zk_start() {
  local dir=$1 cp
  cp=$(zk_classpath) || { echo "zookeeper not found: run zk/ensure-zookeeper.sh" >&2; return 1; }
  nohup java -Xmx64m -Xms16m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 \
    -Dlog4j.configuration="file:$dir/log4j.properties" -cp "$cp" \
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
