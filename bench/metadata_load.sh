#!/usr/bin/env bash
# The metadata store's load under traffic, against a running cluster (scripts/cluster.sh up):
# PostgreSQL's own counters of committed transactions and of statements, read before and after
# a silt-perf run (one topic of PARTITIONS partitions, RATE records/s of 1 KiB, one consumer
# group committing), then pgbench on a scratch database of the same server for what the
# primary carries on this machine.
#
#   bench/metadata_load.sh [PARTITIONS (1000)] [RATE (5000)] [SECONDS (60)]
#
# Environment: CLUSTER_DIR (as scripts/cluster.sh).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
dir=${CLUSTER_DIR:-$PWD/data/cluster}
partitions=${1:-1000}
rate=${2:-5000}
seconds=${3:-60}
[[ -f $dir/env ]] || {
  echo "metadata_load: no cluster (run scripts/cluster.sh up)" >&2
  exit 1
}
# shellcheck disable=SC1091
source "$dir/env"
uri=$CLUSTER_METADATA_URI

counts() {
  psql "$uri" -qtA -F ' ' -c "SELECT xact_commit + xact_rollback, tup_returned + tup_fetched, \
    tup_inserted + tup_updated + tup_deleted FROM pg_stat_database \
    WHERE datname = current_database()"
}
brokers=$(psql "$uri" -qtAc "SELECT count(*) FROM brokers WHERE lease_expires_ms > \
  (extract(epoch from clock_timestamp()) * 1000)::bigint")

# Idle: only the brokers' own polls, heartbeats and controller rounds.
pg_stat() { psql "$uri" -qtAc "SELECT pg_stat_clear_snapshot()" >/dev/null; counts; }
read -r t0 _ _ < <(pg_stat)
sleep 10
read -r t1 _ _ < <(pg_stat)
idle=$(((t1 - t0) / 10))

read -r x0 r0 w0 < <(pg_stat)
start=$(date +%s.%N)
minutes=$(python3 -c "print($seconds / 60)")
"$root/build/silt-perf" --bootstrap-server 127.0.0.1:9092,127.0.0.1:9093,127.0.0.1:9094 \
  --topics 1 --partitions-per-topic "$partitions" --producers-per-topic 3 \
  --groups-per-topic 1 --consumers-per-group 3 --record-size 1024 --send-rate "$rate" \
  --producer-configs enable.idempotence=true acks=all linger.ms=5 \
  --warmup-duration 0 --test-duration "$minutes" >"$dir/metadata_load.perf.txt" 2>&1 || {
  tail -n 20 "$dir/metadata_load.perf.txt" >&2
  exit 1
}
end=$(date +%s.%N)
read -r x1 r1 w1 < <(pg_stat)
elapsed=$(python3 -c "print($end - $start)")

# What one primary carries here: pgbench's TPC-B-like transactions (5 statements each) and
# single-statement selects, 8 clients, 15 s each, on a scratch database.
psql "$uri" -qc "DROP DATABASE IF EXISTS silt_pgbench" >/dev/null 2>&1
psql "$uri" -qc "CREATE DATABASE silt_pgbench" >/dev/null
bench_uri=${uri%/*}/silt_pgbench
pgbench_bin=$(ls /usr/lib/postgresql/*/bin/pgbench | tail -n 1)
"$pgbench_bin" -q -i -s 10 "$bench_uri" >/dev/null 2>&1
tpcb=$("$pgbench_bin" -c 8 -j 2 -T 15 "$bench_uri" 2>/dev/null |
  sed -n 's/^tps = \([0-9.]*\).*/\1/p')
selects=$("$pgbench_bin" -S -c 8 -j 2 -T 15 "$bench_uri" 2>/dev/null |
  sed -n 's/^tps = \([0-9.]*\).*/\1/p')
psql "$uri" -qc "DROP DATABASE silt_pgbench" >/dev/null

python3 - "$brokers" "$partitions" "$rate" "$elapsed" "$idle" "$x0" "$x1" "$r0" "$r1" "$w0" \
  "$w1" "$tpcb" "$selects" <<'EOF'
import sys
brokers, partitions, rate = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
elapsed, idle = float(sys.argv[4]), int(sys.argv[5])
x0, x1, r0, r1, w0, w1 = map(int, sys.argv[6:12])
tpcb, selects = float(sys.argv[12] or 0), float(sys.argv[13] or 0)
tx = (x1 - x0) / elapsed
print(f"{brokers} brokers, {partitions} partitions, {rate} records/s of 1 KiB for {elapsed:.0f} s")
print(f"  metadata transactions: {tx:.0f}/s under traffic ({tx / brokers:.0f} per broker), "
      f"{idle}/s idle")
print(f"  rows read {(r1 - r0) / elapsed:.0f}/s, rows written {(w1 - w0) / elapsed:.0f}/s")
print(f"  this PostgreSQL: {tpcb:.0f} TPC-B transactions/s, {selects:.0f} selects/s (pgbench, 8 "
      f"clients)")
if tx > 0 and tpcb > 0:
    print(f"  brokers at this load before the primary is saturated (TPC-B-sized transactions): "
          f"about {tpcb / (tx / brokers):.0f}")
EOF
