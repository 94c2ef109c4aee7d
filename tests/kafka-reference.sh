#!/usr/bin/env bash
# Reference Apache Kafka broker (single-node KRaft, broker+controller) for
# protocol comparison and golden-capture work. Loopback only.
#
#   kafka-reference.sh install
#       Fetch the Kafka jars from Maven Central with Maven into
#       $SILT_CACHE/kafka-$KAFKA_VERSION/lib. Silent when already installed.
#   kafka-reference.sh start DIR PORT [ADVERTISED_PORT]
#       Format a fresh KRaft log under DIR (unless already formatted) and start
#       the broker listening on 127.0.0.1:PORT, its controller on
#       127.0.0.1:CONTROLLER_PORT (default PORT+1). Clients are told to connect
#       to 127.0.0.1:ADVERTISED_PORT (default PORT), which lets a capture proxy
#       sit in front of the broker. Waits until PORT accepts connections.
#       An existing DIR is reused (same data) if started with the same ports.
#   kafka-reference.sh stop DIR
#       Stop the broker started with DIR.
#   kafka-reference.sh tool CLASS [ARGS...]
#       Run a Kafka tool main class with the Kafka classpath, e.g.
#       kafka-reference.sh tool org.apache.kafka.tools.TopicCommand --help
#   kafka-reference.sh classpath
#       Print the classpath (lib/*).
#
# Environment:
#   KAFKA_VERSION          Kafka version to use (default 4.1.1)
#   SILT_CACHE             cache root (default $HOME/.cache/silt)
#   KAFKA_HEAP_OPTS        broker heap (default -Xms256m -Xmx512m)
#   KAFKA_JVM_OPTS         more JVM options of the broker (e.g. the system property
#                          org.apache.kafka.sasl.oauthbearer.allowed.urls)
#   CONTROLLER_PORT        controller listener port (default PORT+1)
#   KAFKA_START_TIMEOUT    seconds to wait for the broker port (default 90)
#   KAFKA_EXTRA_LISTENERS  more listeners, comma-separated NAME://127.0.0.1:PORT, added to
#                          listeners and advertised.listeners (e.g. SSL://127.0.0.1:19093)
#   KAFKA_EXTRA_PROTOCOLS  their security protocols, NAME:PROTOCOL, comma-separated, added to
#                          listener.security.protocol.map (e.g. SSL:SSL)
#   KAFKA_EXTRA_PROPERTIES more server properties, one per line, appended (e.g. ssl.*)
#   KAFKA_CONTROLLER_PROTOCOL  the controller listener's security protocol (default PLAINTEXT).
#                          With an authorizer the broker must reach its controller as a super
#                          user: e.g. SASL_PLAINTEXT, with sasl.mechanism.controller.protocol and
#                          the listener.name.controller.* SASL settings (whose JAAS username the
#                          broker authenticates as) in KAFKA_EXTRA_PROPERTIES
set -euo pipefail

KAFKA_VERSION="${KAFKA_VERSION:-4.1.1}"
LOG4J_VERSION="${LOG4J_VERSION:-2.24.3}"
SLF4J_VERSION="${SLF4J_VERSION:-2.0.16}"
CACHE_ROOT="${SILT_CACHE:-$HOME/.cache/silt}"
KAFKA_HOME="$CACHE_ROOT/kafka-$KAFKA_VERSION"
LIB_DIR="$KAFKA_HOME/lib"
STAMP="$KAFKA_HOME/.installed"

die() { echo "kafka-reference: $*" >&2; exit 1; }

usage() {
  sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2
  exit 2
}

write_pom() {
  mkdir -p "$KAFKA_HOME"
  cat >"$KAFKA_HOME/pom.xml" <<EOF
<?xml version="1.0" encoding="UTF-8"?>
<project xmlns="http://maven.apache.org/POM/4.0.0"
         xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"
         xsi:schemaLocation="http://maven.apache.org/POM/4.0.0 http://maven.apache.org/xsd/maven-4.0.0.xsd">
  <modelVersion>4.0.0</modelVersion>
  <groupId>silt.reference</groupId>
  <artifactId>kafka-reference</artifactId>
  <version>$KAFKA_VERSION</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>org.apache.kafka</groupId>
      <artifactId>kafka_2.13</artifactId>
      <version>$KAFKA_VERSION</version>
    </dependency>
    <dependency>
      <groupId>org.apache.kafka</groupId>
      <artifactId>kafka-tools</artifactId>
      <version>$KAFKA_VERSION</version>
    </dependency>
    <!-- Kafka pulls slf4j-api 1.7; the log4j2 SLF4J 2 provider needs the 2.x API. -->
    <dependency>
      <groupId>org.slf4j</groupId>
      <artifactId>slf4j-api</artifactId>
      <version>$SLF4J_VERSION</version>
    </dependency>
    <dependency>
      <groupId>org.apache.logging.log4j</groupId>
      <artifactId>log4j-slf4j2-impl</artifactId>
      <version>$LOG4J_VERSION</version>
    </dependency>
    <dependency>
      <groupId>org.apache.logging.log4j</groupId>
      <artifactId>log4j-core</artifactId>
      <version>$LOG4J_VERSION</version>
    </dependency>
  </dependencies>
</project>
EOF
}

write_log4j_configs() {
  # Broker: INFO to DIR/logs/server.log (path given by -Dkafka.logs.dir).
  cat >"$KAFKA_HOME/log4j2-server.properties" <<'EOF'
status = warn
appender.file.type = File
appender.file.name = FILE
appender.file.fileName = ${sys:kafka.logs.dir}/server.log
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = info
rootLogger.appenderRef.file.ref = FILE
logger.clients.name = org.apache.kafka.clients
logger.clients.level = warn
EOF
  # Tools: warnings only, to stderr.
  cat >"$KAFKA_HOME/log4j2-tools.properties" <<'EOF'
status = warn
appender.err.type = Console
appender.err.name = STDERR
appender.err.target = SYSTEM_ERR
appender.err.layout.type = PatternLayout
appender.err.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = warn
rootLogger.appenderRef.err.ref = STDERR
EOF
}

cmd_install() {
  if [[ -f "$STAMP" ]] && compgen -G "$LIB_DIR/kafka_2.13-$KAFKA_VERSION.jar" >/dev/null; then
    [[ -f "$KAFKA_HOME/log4j2-tools.properties" ]] || write_log4j_configs
    return 0
  fi
  command -v mvn >/dev/null || die "mvn not found (install maven)"
  command -v java >/dev/null || die "java not found (install a JDK >= 17)"
  echo "kafka-reference: installing Apache Kafka $KAFKA_VERSION into $KAFKA_HOME" >&2
  write_pom
  write_log4j_configs
  rm -rf "$LIB_DIR"
  if ! (cd "$KAFKA_HOME" && mvn -q -B -Dstyle.color=never dependency:copy-dependencies \
      -DincludeScope=runtime -DoutputDirectory="$LIB_DIR") >"$KAFKA_HOME/install.log" 2>&1; then
    cat "$KAFKA_HOME/install.log" >&2
    die "maven could not fetch Kafka $KAFKA_VERSION (log: $KAFKA_HOME/install.log)"
  fi
  [[ -f "$LIB_DIR/kafka_2.13-$KAFKA_VERSION.jar" ]] || die "kafka_2.13-$KAFKA_VERSION.jar missing after install"
  touch "$STAMP"
}

java_base() {
  # Common JVM options for broker and tools.
  echo "-XX:+UseG1GC -Djava.awt.headless=true"
}

# Runs a Kafka main class in the foreground with tool logging.
cmd_tool() {
  [[ $# -ge 1 ]] || die "tool: missing CLASS"
  cmd_install
  local cls="$1"; shift
  # shellcheck disable=SC2046
  exec java ${KAFKA_TOOL_HEAP_OPTS:--Xmx256m} $(java_base) \
    -Dlog4j2.configurationFile="$KAFKA_HOME/log4j2-tools.properties" \
    -cp "$LIB_DIR/*" "$cls" "$@"
}

port_open() {
  # bash /dev/tcp probe; subshell so the fd closes immediately.
  (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

read_pid() {
  local f="$1/kafka.pid"
  [[ -f "$f" ]] || return 1
  local pid; pid=$(<"$f")
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  kill -0 "$pid" 2>/dev/null || return 1
  echo "$pid"
}

# SIGTERM (controlled shutdown), then SIGKILL after 30 s.
terminate() {
  local pid="$1" i
  kill "$pid" 2>/dev/null || return 0
  for ((i = 0; i < 300; i++)); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$pid" 2>/dev/null; then
    echo "kafka-reference: broker pid $pid did not stop in 30s, killing" >&2
    kill -9 "$pid" 2>/dev/null || true
  fi
  wait "$pid" 2>/dev/null || true
}

cmd_start() {
  [[ $# -ge 2 ]] || die "start: usage: start DIR PORT [ADVERTISED_PORT]"
  local dir="$1" port="$2" adv="${3:-$2}"
  local cport="${CONTROLLER_PORT:-$((port + 1))}"
  local timeout="${KAFKA_START_TIMEOUT:-90}" pid
  [[ "$port" =~ ^[0-9]+$ && "$adv" =~ ^[0-9]+$ && "$cport" =~ ^[0-9]+$ ]] || die "start: ports must be numbers"
  cmd_install
  mkdir -p "$dir"
  dir="$(cd "$dir" && pwd)"
  if pid=$(read_pid "$dir"); then
    die "start: a broker is already running for $dir (pid $pid)"
  fi
  port_open "$port" && die "start: 127.0.0.1:$port is already in use"
  port_open "$cport" && die "start: controller port 127.0.0.1:$cport is already in use"

  mkdir -p "$dir/data" "$dir/logs"
  # A formatted KRaft log remembers its controller endpoint: reuse DIR only
  # with the same ports.
  if [[ -f "$dir/data/meta.properties" && -f "$dir/server.properties" ]] \
     && ! grep -q "^listeners=PLAINTEXT://127.0.0.1:$port,CONTROLLER://127.0.0.1:$cport\(,\|$\)" "$dir/server.properties"; then
    die "start: $dir was formatted for other ports; remove it or use the same ports"
  fi
  local extra_listeners="${KAFKA_EXTRA_LISTENERS:+,$KAFKA_EXTRA_LISTENERS}"
  local extra_protocols="${KAFKA_EXTRA_PROTOCOLS:+,$KAFKA_EXTRA_PROTOCOLS}"
  cat >"$dir/server.properties" <<EOF
process.roles=broker,controller
node.id=1
controller.quorum.bootstrap.servers=127.0.0.1:$cport
listeners=PLAINTEXT://127.0.0.1:$port,CONTROLLER://127.0.0.1:$cport$extra_listeners
advertised.listeners=PLAINTEXT://127.0.0.1:$adv,CONTROLLER://127.0.0.1:$cport$extra_listeners
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:${KAFKA_CONTROLLER_PROTOCOL:-PLAINTEXT}$extra_protocols
log.dirs=$dir/data
num.partitions=1
default.replication.factor=1
min.insync.replicas=1
offsets.topic.replication.factor=1
offsets.topic.num.partitions=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
auto.create.topics.enable=true
log.retention.hours=168
EOF
  if [[ -n "${KAFKA_EXTRA_PROPERTIES:-}" ]]; then
    printf '%s\n' "$KAFKA_EXTRA_PROPERTIES" >>"$dir/server.properties"
  fi

  if [[ ! -f "$dir/data/meta.properties" ]]; then
    local cluster_id
    cluster_id=$(KAFKA_TOOL_HEAP_OPTS=-Xmx128m "$0" tool kafka.tools.StorageTool random-uuid | tail -n1)
    [[ -n "$cluster_id" ]] || die "start: could not generate a cluster id"
    KAFKA_TOOL_HEAP_OPTS=-Xmx128m "$0" tool kafka.tools.StorageTool format --standalone \
      -t "$cluster_id" -c "$dir/server.properties" >"$dir/logs/format.log" 2>&1 \
      || { cat "$dir/logs/format.log" >&2; die "start: storage format failed"; }
  fi

  # shellcheck disable=SC2046
  nohup java ${KAFKA_HEAP_OPTS:--Xms256m -Xmx512m} ${KAFKA_JVM_OPTS:-} $(java_base) \
    -Dkafka.logs.dir="$dir/logs" \
    -Dlog4j2.configurationFile="$KAFKA_HOME/log4j2-server.properties" \
    -cp "$LIB_DIR/*" kafka.Kafka "$dir/server.properties" \
    >"$dir/logs/stdout.log" 2>&1 </dev/null &
  local pid=$!
  echo "$pid" >"$dir/kafka.pid"

  local waited=0
  until port_open "$port"; do
    if ! kill -0 "$pid" 2>/dev/null; then
      rm -f "$dir/kafka.pid"
      tail -n 30 "$dir/logs/stdout.log" "$dir/logs/server.log" >&2 2>/dev/null || true
      die "start: broker exited during startup (logs in $dir/logs)"
    fi
    if (( waited >= timeout * 10 )); then
      terminate "$pid"
      rm -f "$dir/kafka.pid"
      die "start: broker did not accept connections on 127.0.0.1:$port within ${timeout}s (logs in $dir/logs)"
    fi
    sleep 0.1
    waited=$((waited + 1))
  done
  echo "kafka-reference: Kafka $KAFKA_VERSION up on 127.0.0.1:$port (advertised 127.0.0.1:$adv, controller $cport, pid $pid)" >&2
}

cmd_stop() {
  [[ $# -ge 1 ]] || die "stop: usage: stop DIR"
  local dir="$1" pid
  if ! pid=$(read_pid "$dir"); then
    rm -f "$dir/kafka.pid"
    return 0
  fi
  terminate "$pid"
  rm -f "$dir/kafka.pid"
}

[[ $# -ge 1 ]] || usage
sub="$1"; shift
case "$sub" in
  install)   cmd_install ;;
  start)     cmd_start "$@" ;;
  stop)      cmd_stop "$@" ;;
  tool)      cmd_tool "$@" ;;
  classpath) cmd_install; echo "$LIB_DIR/*" ;;
  -h|--help|help) usage ;;
  *) die "unknown command '$sub' (install|start|stop|tool|classpath)" ;;
esac
