#!/usr/bin/env bash
# A Silt cluster on this machine, with real parts: PostgreSQL (the metadata store), Ceph's
# radosgw (the S3 object store) and three brokers in two racks, each with its own WAL, all
# sharing one database and one bucket. Every file lives under CLUSTER_DIR (default
# ./data/cluster).
#
#   cluster.sh up        start PostgreSQL, radosgw and brokers 1-3 (ports 9092-9094; racks
#                        zone-a, zone-b, zone-a); the bootstrap list is printed
#   cluster.sh up --secure
#                        the same with TLS, SASL/SCRAM-SHA-512 and ACLs: each broker's one
#                        listener is SASL_SSL, with a certificate of the cluster's own CA
#                        (CLUSTER_DIR/tls/ca.pem); Kafka's StandardAuthorizer, super user
#                        User:admin, whose SCRAM credential is made on the first such start;
#                        the admin's client settings (CLUSTER_DIR/client.properties, for
#                        Kafka's tools: --command-config) are printed. Every broker started
#                        until `down` is secure, a fourth one included
#   cluster.sh down      stop the brokers, then radosgw and PostgreSQL
#   cluster.sh start N   start broker N (a fourth joins the same way: cluster.sh start 4)
#   cluster.sh stop N    stop broker N cleanly (SIGTERM)
#   cluster.sh kill N    kill broker N (SIGKILL)
#   cluster.sh status    the servers and brokers running, and the brokers the cluster lists
#
# Environment: CLUSTER_DIR, SILT (the broker binary, default build/silt), BASE_PORT (default
# 9092: broker N listens on BASE_PORT+N-1), CLUSTER_SETTINGS (more broker settings for every
# broker, space-separated key=value). Broker N's log is CLUSTER_DIR/broker-N/log. --secure needs
# openssl, and Kafka's tools (tests/kafka-reference.sh install) to make the admin's credential.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
dir=${CLUSTER_DIR:-$PWD/data/cluster}
silt=${SILT:-$root/build/silt}
base_port=${BASE_PORT:-9092}

usage() {
  sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2
  exit 2
}
log() { echo "cluster: $*" >&2; }

port_of() { echo $((base_port + $1 - 1)); }
rack_of() { if (($1 % 2 == 0)); then echo zone-b; else echo zone-a; fi; }
pid_of() {
  local f=$dir/broker-$1/pid
  [[ -f $f ]] && kill -0 "$(cat "$f")" 2>/dev/null && cat "$f"
}

servers_env() {
  [[ -f $dir/env ]] || {
    log "not up (run: $0 up)"
    exit 1
  }
  # shellcheck disable=SC1091
  source "$dir/env"
}

# The cluster's CA, made once: CLUSTER_DIR/tls/ca.pem (certificate) and ca.key.
make_ca() {
  local t=$dir/tls
  [[ -f $t/ca.pem && -f $t/ca.key ]] && return
  mkdir -p "$t"
  chmod 700 "$t"
  openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/CN=Silt cluster CA" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
    -keyout "$t/ca.key" -out "$t/ca.pem" 2>/dev/null
}

# Broker N's key store: its certificate, signed by the CA and naming 127.0.0.1 and localhost
# (clients check that the broker's certificate names the host they connect to), then its key
# (PKCS#8, unencrypted), in one PEM file: CLUSTER_DIR/tls/broker-N.pem.
make_broker_certificate() {
  local n=$1 t=$dir/tls
  [[ -f $t/broker-$n.pem ]] && return
  make_ca
  openssl req -newkey rsa:2048 -nodes -subj "/CN=broker-$n" -keyout "$t/broker-$n.key" \
    -out "$t/broker-$n.csr" 2>/dev/null
  openssl x509 -req -in "$t/broker-$n.csr" -CA "$t/ca.pem" -CAkey "$t/ca.key" \
    -CAcreateserial -days 825 -out "$t/broker-$n.crt" \
    -extfile <(printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n') \
    2>/dev/null
  cat "$t/broker-$n.crt" "$t/broker-$n.key" >"$t/broker-$n.pem.tmp"
  mv "$t/broker-$n.pem.tmp" "$t/broker-$n.pem"
  rm -f "$t/broker-$n.csr" "$t/broker-$n.crt" "$t/broker-$n.key"
}

# start_broker N [plain]: plain starts it with a PLAINTEXT listener and no authorizer, whatever
# the cluster is (making the admin's credential needs that).
start_broker() {
  local n=$1 mode=${2:-}
  servers_env
  if pid=$(pid_of "$n"); then
    log "broker $n already runs (pid $pid)"
    return
  fi
  local d=$dir/broker-$n
  mkdir -p "$d"
  local security=(--override "listeners=PLAINTEXT://127.0.0.1:$(port_of "$n")")
  if [[ ${CLUSTER_SECURE:-0} == 1 && $mode != plain ]]; then
    make_broker_certificate "$n"
    # Brokers exchange no data over Kafka listeners: the one listener is the clients'.
    security=(
      --override "listeners=SASL_SSL://127.0.0.1:$(port_of "$n")"
      --override "sasl.enabled.mechanisms=SCRAM-SHA-512"
      --override "ssl.keystore.type=PEM"
      --override "ssl.keystore.location=$dir/tls/broker-$n.pem"
      --override "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer"
      --override "super.users=User:admin"
    )
  fi
  local extra=() setting
  for setting in ${CLUSTER_SETTINGS:-}; do extra+=(--override "$setting"); done
  (
    cd "$d"
    AWS_ACCESS_KEY_ID=$SILT_S3_ACCESS_KEY AWS_SECRET_ACCESS_KEY=$SILT_S3_SECRET_KEY \
      setsid "$silt" \
      --override "node.id=$n" \
      --override "broker.rack=$(rack_of "$n")" \
      "${security[@]}" \
      --override "data.dir=$d/data" \
      --override "metadata.store.uri=$CLUSTER_METADATA_URI" \
      --override "object.store.uri=$CLUSTER_OBJECT_URI" \
      "${extra[@]}" \
      >>"$d/log" 2>&1 </dev/null &
    echo $! >"$d/pid"
  )
  # Listening once the port answers.
  for _ in $(seq 1 300); do
    if (echo >"/dev/tcp/127.0.0.1/$(port_of "$n")") 2>/dev/null; then
      log "broker $n listens on 127.0.0.1:$(port_of "$n") (rack $(rack_of "$n"))"
      return
    fi
    if ! pid_of "$n" >/dev/null; then
      tail -n 20 "$d/log" >&2
      log "broker $n exited"
      exit 1
    fi
    sleep 0.1
  done
  log "broker $n did not listen within 30 s (log: $d/log)"
  exit 1
}

signal_broker() {
  local n=$1 sig=$2
  if pid=$(pid_of "$n"); then
    kill "-$sig" "$pid"
    # A clean stop waits for the broker to finish.
    for _ in $(seq 1 300); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    log "broker $n stopped ($sig)"
  else
    log "broker $n is not running"
  fi
}

up() {
  local secure=0
  case ${1:-} in
    "") ;;
    --secure) secure=1 ;;
    *) usage ;;
  esac
  mkdir -p "$dir"
  local pg s3
  pg=$("$root/scripts/pg-test-server.sh" start "$dir/postgresql")
  s3=$("$root/scripts/s3-test-server.sh" start "$dir/s3")
  eval "$pg"
  eval "$s3"
  local db=silt_cluster
  local admin_uri=$SILT_TEST_POSTGRES_URI
  psql "$admin_uri" -qtAc "SELECT 1 FROM pg_database WHERE datname = '$db'" | grep -q 1 ||
    psql "$admin_uri" -qc "CREATE DATABASE $db" >/dev/null
  local bucket=silt-cluster
  curl -sS -o /dev/null -X PUT --aws-sigv4 "aws:amz:$SILT_S3_REGION:s3" \
    --user "$SILT_S3_ACCESS_KEY:$SILT_S3_SECRET_KEY" \
    -H "x-amz-content-sha256: e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855" \
    "$SILT_S3_ENDPOINT/$bucket"
  cat >"$dir/env" <<EOF
SILT_S3_ACCESS_KEY=$SILT_S3_ACCESS_KEY
SILT_S3_SECRET_KEY=$SILT_S3_SECRET_KEY
CLUSTER_METADATA_URI=${admin_uri%/postgres}/$db
CLUSTER_OBJECT_URI="s3://$bucket?endpoint=$SILT_S3_ENDPOINT&region=$SILT_S3_REGION&path_style=true"
CLUSTER_SECURE=$secure
EOF
  if ((secure)); then make_admin; fi
  for n in 1 2 3; do start_broker "$n"; done
  local servers
  servers="127.0.0.1:$(port_of 1),127.0.0.1:$(port_of 2),127.0.0.1:$(port_of 3)"
  if ((secure)); then
    write_client_properties "$servers"
    log "the admin's client settings: $dir/client.properties"
    cat "$dir/client.properties"
  else
    echo "bootstrap.servers=$servers"
  fi
}

# The super user admin: a SCRAM-SHA-512 credential in the metadata store, its password drawn
# once (CLUSTER_DIR/admin.password). On a secure broker only a super user may change
# credentials, so the first one is made through broker 1 started alone with a PLAINTEXT
# listener and no authorizer (on loopback, for the few seconds it takes), then stopped.
make_admin() {
  servers_env
  local pw_file=$dir/admin.password
  if [[ -s $pw_file ]] && psql "$CLUSTER_METADATA_URI" -qtAc "SELECT 1 FROM scram_credentials
      WHERE user_name = 'admin' AND mechanism = 'SCRAM-SHA-512'" 2>/dev/null | grep -q 1; then
    return
  fi
  [[ -s $pw_file ]] || (umask 077 && openssl rand -hex 16 >"$pw_file")
  log "making the SCRAM-SHA-512 credential of User:admin through broker 1"
  start_broker 1 plain
  local out
  if ! out=$("$root/tests/kafka-reference.sh" tool kafka.admin.ConfigCommand \
    --bootstrap-server "127.0.0.1:$(port_of 1)" --alter --entity-type users --entity-name admin \
    --add-config "SCRAM-SHA-512=[password=$(cat "$pw_file")]" 2>&1); then
    echo "$out" >&2
    signal_broker 1 TERM
    log "could not make the admin's credential"
    exit 1
  fi
  signal_broker 1 TERM
}

# CLUSTER_DIR/client.properties: the admin's settings, for Kafka's Java clients and tools.
write_client_properties() {
  (
    umask 077
    cat >"$dir/client.properties" <<EOF
bootstrap.servers=$1
security.protocol=SASL_SSL
sasl.mechanism=SCRAM-SHA-512
sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="admin" password="$(cat "$dir/admin.password")";
ssl.truststore.type=PEM
ssl.truststore.location=$dir/tls/ca.pem
EOF
  )
}

down() {
  for d in "$dir"/broker-*; do
    [[ -d $d ]] || continue
    signal_broker "${d##*-}" TERM
  done
  "$root/scripts/s3-test-server.sh" stop "$dir/s3" || true
  "$root/scripts/pg-test-server.sh" stop "$dir/postgresql" || true
  rm -f "$dir/env"
}

status() {
  servers_env
  for d in "$dir"/broker-*; do
    [[ -d $d ]] || continue
    local n=${d##*-}
    if pid=$(pid_of "$n"); then
      echo "broker $n: running (pid $pid, 127.0.0.1:$(port_of "$n"), rack $(rack_of "$n"))"
    else
      echo "broker $n: stopped"
    fi
  done
  psql "$CLUSTER_METADATA_URI" -qtA -F ' ' -c "SELECT 'registered: node', node_id, 'epoch', \
    broker_epoch, host || ':' || port, rack, CASE WHEN lease_expires_ms > \
    (extract(epoch from clock_timestamp()) * 1000)::bigint THEN 'live' ELSE 'lapsed' END \
    FROM brokers ORDER BY node_id"
  psql "$CLUSTER_METADATA_URI" -qtA -F ' ' -c "SELECT 'controller: node', node_id, 'epoch', \
    epoch FROM controller"
}

[[ $# -ge 1 ]] || usage
case $1 in
  up) [[ $# -le 2 ]] || usage; up "${2:-}" ;;
  down) down ;;
  start) [[ $# -eq 2 ]] || usage; start_broker "$2" ;;
  stop) [[ $# -eq 2 ]] || usage; signal_broker "$2" TERM ;;
  kill) [[ $# -eq 2 ]] || usage; signal_broker "$2" KILL ;;
  status) status ;;
  *) usage ;;
esac
