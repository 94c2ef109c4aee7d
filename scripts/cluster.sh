#!/usr/bin/env bash
# A Silt cluster on this machine, with real parts: PostgreSQL (the metadata store), Ceph's
# radosgw (the S3 object store) and three brokers in two racks, each with its own WAL, all
# sharing one database and one bucket. Every file lives under CLUSTER_DIR (default
# ./data/cluster).
#
#   cluster.sh up        start PostgreSQL, radosgw and brokers 1-3 (ports 9092-9094; racks
#                        zone-a, zone-b, zone-a); the bootstrap list is printed
#   cluster.sh down      stop the brokers, then radosgw and PostgreSQL
#   cluster.sh start N   start broker N (a fourth joins the same way: cluster.sh start 4)
#   cluster.sh stop N    stop broker N cleanly (SIGTERM)
#   cluster.sh kill N    kill broker N (SIGKILL)
#   cluster.sh status    the servers and brokers running, and the brokers the cluster lists
#
# Environment: CLUSTER_DIR, SILT (the broker binary, default build/silt), BASE_PORT (default
# 9092: broker N listens on BASE_PORT+N-1), CLUSTER_SETTINGS (more broker settings for every
# broker, space-separated key=value). Broker N's log is CLUSTER_DIR/broker-N/log.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
dir=${CLUSTER_DIR:-$PWD/data/cluster}
silt=${SILT:-$root/build/silt}
base_port=${BASE_PORT:-9092}

usage() {
  sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//' >&2
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

start_broker() {
  local n=$1
  servers_env
  if pid=$(pid_of "$n"); then
    log "broker $n already runs (pid $pid)"
    return
  fi
  local d=$dir/broker-$n
  mkdir -p "$d"
  local extra=() setting
  for setting in ${CLUSTER_SETTINGS:-}; do extra+=(--override "$setting"); done
  (
    cd "$d"
    AWS_ACCESS_KEY_ID=$SILT_S3_ACCESS_KEY AWS_SECRET_ACCESS_KEY=$SILT_S3_SECRET_KEY \
      setsid "$silt" \
      --override "node.id=$n" \
      --override "broker.rack=$(rack_of "$n")" \
      --override "listeners=PLAINTEXT://127.0.0.1:$(port_of "$n")" \
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
EOF
  for n in 1 2 3; do start_broker "$n"; done
  echo "bootstrap.servers=127.0.0.1:$(port_of 1),127.0.0.1:$(port_of 2),127.0.0.1:$(port_of 3)"
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
  up) up ;;
  down) down ;;
  start) [[ $# -eq 2 ]] || usage; start_broker "$2" ;;
  stop) [[ $# -eq 2 ]] || usage; signal_broker "$2" TERM ;;
  kill) [[ $# -eq 2 ]] || usage; signal_broker "$2" KILL ;;
  status) status ;;
  *) usage ;;
esac
