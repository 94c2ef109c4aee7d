#!/usr/bin/env bash
# Kafka Connect scenario of the client compatibility matrix (see tests/compat/README.md):
# Apache Kafka Connect in standalone mode with the FileStream source and sink connectors.
#
#   tests/compat/connect/run.sh BOOTSTRAP WORKDIR [KAFKA_VERSION]
#
# 1. Installs Kafka Connect KAFKA_VERSION (default 4.1.1): connect-runtime, connect-file,
#    connect-json and a log4j2 binding, fetched from Maven Central with Maven into
#    $SILT_CACHE/connect-KAFKA_VERSION (default ~/.cache/silt). Silent when already installed.
#    connect-file goes to a plugin directory of its own, named by the worker's plugin.path,
#    as a user of the Kafka distribution does (it is not on Connect's classpath since 3.2).
# 2. Writes to WORKDIR a worker config (StringConverter for keys and values, file offset
#    store, offset.flush.interval.ms=1000) and two connectors: a FileStreamSource reading
#    WORKDIR/in.txt into the topic connect-RANDOM, which the source creates itself (worker
#    topic.creation.enable=true, one partition, replication factor 1), and a FileStreamSink
#    writing that topic to WORKDIR/out.txt.
# 3. Writes 1,000 lines to in.txt (line-000000 ...), starts ConnectStandalone in the
#    background (log: WORKDIR/connect.log), waits until out.txt holds exactly these lines in
#    order, appends 500 lines to in.txt and waits until out.txt holds all 1,500. Each wait is
#    at most CONNECT_TIMEOUT seconds. Then stops Connect (SIGTERM, SIGKILL after 20 s).
# 4. Prints {"lines": 1500} and exits 0; otherwise exits 1 with the error on the last line of
#    stderr (a connector or task that failed, with the first line of its trace, or what
#    out.txt holds), followed by the last ERROR line of connect.log (else its last WARN).
#
# Environment:
#   SILT_CACHE          cache root (default $HOME/.cache/silt)
#   CONNECT_FILE_VERSION  version of the connect-file plugin (default KAFKA_VERSION), for a
#                       worker whose own connect-file cannot be fetched: 4.4.0 with 4.3.1
#   CONNECT_REST_PORT   port of Connect's REST listener on 127.0.0.1 (default 0: any free
#                       port; the port Connect took is read from its log)
#   CONNECT_TIMEOUT     seconds to wait for each batch of lines (default 90)
#   CONNECT_HEAP_OPTS   JVM heap (default -Xms128m -Xmx512m)
#   CONNECT_LOG_LEVEL   root log level of connect.log (default INFO)
set -euo pipefail

die() {
  echo "compat/connect: $*" >&2
  exit 1
}

[[ $# -ge 2 && $# -le 3 ]] || die "usage: $0 BOOTSTRAP WORKDIR [KAFKA_VERSION]"
BOOTSTRAP=$1
KAFKA_VERSION=${3:-4.1.1}
LOG4J_VERSION=${LOG4J_VERSION:-2.24.3}
SLF4J_VERSION=${SLF4J_VERSION:-2.0.16}
CACHE_ROOT=${SILT_CACHE:-$HOME/.cache/silt}
CONNECT_FILE_VERSION=${CONNECT_FILE_VERSION:-$KAFKA_VERSION}
CONNECT_HOME=$CACHE_ROOT/connect-$KAFKA_VERSION
LIB_DIR=$CONNECT_HOME/lib
PLUGIN_DIR=$CONNECT_HOME/plugins
STAMP=$CONNECT_HOME/.installed
TIMEOUT=${CONNECT_TIMEOUT:-90}
REST_PORT=${CONNECT_REST_PORT:-0}
FIRST=1000
MORE=500

[[ $KAFKA_VERSION =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || die "bad KAFKA_VERSION '$KAFKA_VERSION'"
[[ $CONNECT_FILE_VERSION =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] ||
  die "bad CONNECT_FILE_VERSION '$CONNECT_FILE_VERSION'"
[[ $REST_PORT =~ ^[0-9]+$ ]] || die "CONNECT_REST_PORT must be a number"
[[ $TIMEOUT =~ ^[0-9]+$ ]] || die "CONNECT_TIMEOUT must be a number of seconds"

# ---- install ----------------------------------------------------------------------------

write_pom() {
  mkdir -p "$CONNECT_HOME"
  cat >"$CONNECT_HOME/pom.xml" <<EOF
<?xml version="1.0" encoding="UTF-8"?>
<project xmlns="http://maven.apache.org/POM/4.0.0"
         xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"
         xsi:schemaLocation="http://maven.apache.org/POM/4.0.0 http://maven.apache.org/xsd/maven-4.0.0.xsd">
  <modelVersion>4.0.0</modelVersion>
  <groupId>silt.compat</groupId>
  <artifactId>kafka-connect</artifactId>
  <version>$KAFKA_VERSION</version>
  <packaging>pom</packaging>
  <dependencies>
    <!-- The worker (ConnectStandalone), its REST server and the transforms. -->
    <dependency>
      <groupId>org.apache.kafka</groupId>
      <artifactId>connect-runtime</artifactId>
      <version>$KAFKA_VERSION</version>
    </dependency>
    <dependency>
      <groupId>org.apache.kafka</groupId>
      <artifactId>connect-json</artifactId>
      <version>$KAFKA_VERSION</version>
    </dependency>
    <!-- Logging through log4j2 to connect.log; its SLF4J 2 provider needs the 2.x API. -->
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

write_log4j_config() {
  # Everything to stdout, which run.sh sends to WORKDIR/connect.log.
  cat >"$CONNECT_HOME/log4j2.properties" <<'EOF'
status = warn
appender.out.type = Console
appender.out.name = STDOUT
appender.out.target = SYSTEM_OUT
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = ${sys:connect.log.level:-INFO}
rootLogger.appenderRef.out.ref = STDOUT
logger.reflections.name = org.reflections
logger.reflections.level = error
EOF
}

# mvn ARGS... in CONNECT_HOME, its output appended to install.log; dies with the artifact
# that Maven could not find, if that is why it failed.
mvn_install() {
  local log=$CONNECT_HOME/install.log missing
  if ! (cd "$CONNECT_HOME" && mvn -q -B -Dstyle.color=never "$@") >>"$log" 2>&1; then
    tail -n 40 "$log" | awk '{ gsub(/\033\[[0-9;]*m/, "") } length { print }' >&2
    missing=$(grep -a 'ERROR' "$log" | grep -o -E '[A-Za-z0-9_.-]+:[A-Za-z0-9_.-]+:jar:[0-9][^ ,]*' |
      head -n 1 || true)
    die "maven could not fetch Kafka Connect $KAFKA_VERSION${missing:+: $missing not found}" \
      "(log: $log)"
  fi
}

install() {
  local plugin=$PLUGIN_DIR/connect-file
  if [[ -f $STAMP ]] && compgen -G "$LIB_DIR/connect-runtime-$KAFKA_VERSION.jar" >/dev/null \
     && compgen -G "$plugin/connect-file-$CONNECT_FILE_VERSION.jar" >/dev/null; then
    [[ -f $CONNECT_HOME/log4j2.properties ]] || write_log4j_config
    return 0
  fi
  command -v mvn >/dev/null || die "mvn not found (install maven)"
  command -v java >/dev/null || die "java not found (install a JDK >= 17)"
  echo "compat/connect: installing Kafka Connect $KAFKA_VERSION" \
    "(connect-file $CONNECT_FILE_VERSION) into $CONNECT_HOME" >&2
  rm -f "$STAMP"
  write_pom
  write_log4j_config
  rm -rf "$LIB_DIR" "$PLUGIN_DIR"
  : >"$CONNECT_HOME/install.log"
  # The worker's classpath.
  mvn_install dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$LIB_DIR"
  [[ -f $LIB_DIR/connect-runtime-$KAFKA_VERSION.jar ]] ||
    die "connect-runtime-$KAFKA_VERSION.jar missing after install"
  # The FileStream connectors, in a plugin directory of their own. Their dependencies
  # (connect-api, kafka-clients) are on the worker's classpath; a connect-file of another
  # release gets its own kafka-clients beside it, since it may use classes that a newer
  # kafka-clients moved (4.4 moved AppInfoParser, which 4.3's connectors call).
  mvn_install dependency:copy -Dartifact="org.apache.kafka:connect-file:$CONNECT_FILE_VERSION" \
    -DoutputDirectory="$plugin"
  if [[ $CONNECT_FILE_VERSION != "$KAFKA_VERSION" ]]; then
    mvn_install dependency:copy -Dartifact="org.apache.kafka:kafka-clients:$CONNECT_FILE_VERSION" \
      -DoutputDirectory="$plugin"
  fi
  [[ -f $plugin/connect-file-$CONNECT_FILE_VERSION.jar ]] ||
    die "connect-file-$CONNECT_FILE_VERSION.jar missing after install"
  touch "$STAMP"
}

install

# ---- configs ----------------------------------------------------------------------------

mkdir -p "$2"
WORK=$(cd "$2" && pwd)
IN=$WORK/in.txt
OUT=$WORK/out.txt
LOG=$WORK/connect.log
rm -f "$IN" "$OUT" "$LOG" "$WORK/connect.offsets"

suffix=$(od -An -N4 -tx1 /dev/urandom | tr -d ' \n')
TOPIC=connect-$suffix
SOURCE=silt-file-source-$suffix
SINK=silt-file-sink-$suffix

cat >"$WORK/worker.properties" <<EOF
bootstrap.servers=$BOOTSTRAP
key.converter=org.apache.kafka.connect.storage.StringConverter
value.converter=org.apache.kafka.connect.storage.StringConverter
offset.storage.file.filename=$WORK/connect.offsets
offset.flush.interval.ms=1000
plugin.path=$PLUGIN_DIR
plugin.discovery=service_load
listeners=http://127.0.0.1:$REST_PORT
topic.creation.enable=true
EOF

cat >"$WORK/source.properties" <<EOF
name=$SOURCE
connector.class=org.apache.kafka.connect.file.FileStreamSourceConnector
tasks.max=1
file=$IN
topic=$TOPIC
topic.creation.default.replication.factor=1
topic.creation.default.partitions=1
EOF

cat >"$WORK/sink.properties" <<EOF
name=$SINK
connector.class=org.apache.kafka.connect.file.FileStreamSinkConnector
tasks.max=1
file=$OUT
topics=$TOPIC
EOF

# lines FROM COUNT: line-FROM ... line-(FROM+COUNT-1), one a line.
lines() {
  local i
  for ((i = $1; i < $1 + $2; i++)); do printf 'line-%06d\n' "$i"; done
}

# ---- Connect ----------------------------------------------------------------------------

CONNECT_PID=

stop_connect() {
  local pid=$CONNECT_PID i
  [[ -n $pid ]] || return 0
  CONNECT_PID=
  kill "$pid" 2>/dev/null || return 0
  for ((i = 0; i < 200; i++)); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$pid" 2>/dev/null; then
    echo "compat/connect: Connect (pid $pid) did not stop in 20 s, killing it" >&2
    kill -9 "$pid" 2>/dev/null || true
  fi
  wait "$pid" 2>/dev/null || true
}
trap stop_connect EXIT
trap 'exit 1' INT TERM

last_line() {
  # The last line of connect.log at level $1, if any.
  [[ -f $LOG ]] || return 0
  grep -a " $1 " "$LOG" | tail -n 1 | cut -c1-600 || true
}

fail() {
  local line
  line=$(last_line ERROR)
  [[ -z $line ]] || die "$1; last error in connect.log: $line"
  line=$(last_line WARN)
  [[ -z $line ]] || die "$1; no error in connect.log, last warning: $line"
  die "$1 (no error or warning in connect.log)"
}

# The REST port Connect listens on (CONNECT_REST_PORT, or read from the log for port 0).
rest_port() {
  if [[ $REST_PORT != 0 ]]; then
    echo "$REST_PORT"
    return 0
  fi
  [[ -f $LOG ]] || return 1
  grep -a -o -m1 'REST server listening at http://[^/,]*:[0-9]*' "$LOG" | sed 's/.*://'
}

# Prints "NAME [task N] FAILED: first line of its trace" for the first connector or task
# that failed, as Connect's REST API reports it; nothing otherwise.
failed_status() {
  local port
  port=$(rest_port) || return 0
  [[ -n $port ]] || return 0
  python3 - "$port" "$SOURCE" "$SINK" <<'EOF' 2>/dev/null || true
import json, sys, urllib.request
port = sys.argv[1]
for name in sys.argv[2:]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/connectors/{name}/status",
                                    timeout=2) as r:
            st = json.load(r)
    except Exception:
        continue
    items = [(name, st.get("connector", {}))]
    items += [(f"{name} task {t.get('id')}", t) for t in st.get("tasks", [])]
    for what, s in items:
        if s.get("state") == "FAILED":
            trace = (s.get("trace") or "").strip().splitlines()
            print(f"{what} FAILED: {trace[0] if trace else 'no trace'}"[:600])
            sys.exit(0)
EOF
}

# Checks out.txt against the first WANT lines of in.txt. Returns 0 when they are equal,
# 1 while out.txt is a (shorter) prefix of them; fails on anything else.
check_out() {
  local want=$1 n=0 bad
  [[ -f $OUT ]] || return 1
  n=$(wc -l <"$OUT")
  if ((n > want)); then
    fail "out.txt has $n lines, more than the $want written to in.txt"
  fi
  if ! cmp -s <(head -n "$n" "$OUT") <(head -n "$n" "$IN"); then
    bad=$(awk 'NR == FNR { a[NR] = $0; next } FNR in a && a[FNR] != $0 {
                 printf "line %d is \"%s\", expected \"%s\"", FNR, $0, a[FNR]; exit }' \
          <(head -n "$n" "$IN") <(head -n "$n" "$OUT"))
    fail "out.txt differs from in.txt: $bad"
  fi
  ((n == want)) || return 1
  # No partial line after the last one.
  cmp -s "$OUT" <(head -n "$want" "$IN") ||
    fail "out.txt has $want lines and then \"$(tail -c +"$(($(head -n "$want" "$IN" | wc -c) + 1))" "$OUT" | head -c 80)\""
  return 0
}

# Waits at most TIMEOUT seconds until out.txt holds the first WANT lines of in.txt.
wait_for() {
  local want=$1 start=$SECONDS tick=0 failed n
  while ! check_out "$want"; do
    if ! kill -0 "$CONNECT_PID" 2>/dev/null; then
      local rc=0
      wait "$CONNECT_PID" 2>/dev/null || rc=$?
      CONNECT_PID=
      n=0; [[ -f $OUT ]] && n=$(wc -l <"$OUT")
      fail "Connect exited (status $rc) with $n of $want lines in out.txt"
    fi
    if ((tick % 4 == 0)); then
      failed=$(failed_status)
      [[ -z $failed ]] || fail "$failed"
    fi
    if ((SECONDS - start >= TIMEOUT)); then
      n=0; [[ -f $OUT ]] && n=$(wc -l <"$OUT")
      failed=$(failed_status)
      [[ -z $failed ]] || fail "out.txt has $n of $want lines after $TIMEOUT s; $failed"
      fail "out.txt has $n of $want lines after $TIMEOUT s"
    fi
    sleep 0.5
    tick=$((tick + 1))
  done
}

lines 0 "$FIRST" >"$IN"

# Connect gets SIGTERM if this script is killed (a runner's time-out) where setpriv exists.
pdeath=()
command -v setpriv >/dev/null && pdeath=(setpriv --pdeathsig TERM)
# shellcheck disable=SC2086
"${pdeath[@]}" java ${CONNECT_HEAP_OPTS:--Xms128m -Xmx512m} -XX:+UseG1GC -Djava.awt.headless=true \
  -Dlog4j2.configurationFile="$CONNECT_HOME/log4j2.properties" \
  -Dconnect.log.level="${CONNECT_LOG_LEVEL:-INFO}" \
  -cp "$LIB_DIR/*" org.apache.kafka.connect.cli.ConnectStandalone \
  "$WORK/worker.properties" "$WORK/source.properties" "$WORK/sink.properties" \
  >"$LOG" 2>&1 </dev/null &
CONNECT_PID=$!

wait_for "$FIRST"
lines "$FIRST" "$MORE" >>"$IN"
wait_for $((FIRST + MORE))
stop_connect
echo "{\"lines\": $((FIRST + MORE))}"
