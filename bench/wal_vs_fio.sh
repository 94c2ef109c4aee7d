#!/usr/bin/env bash
# Runs wal_bench and fio on the same file with the same block size, queue depth and sync mode,
# and prints the WAL's throughput and p99 latency beside fio's, with the WAL/fio ratios.
#
# Usage: bench/wal_vs_fio.sh [BUILD_DIR [FILE]]
#   BUILD_DIR  holds bench/wal_bench (default: build)
#   FILE       the WAL file, created by wal_bench (default: BUILD_DIR/wal_vs_fio.wal)
# Environment: SECONDS_PER_RUN (3), SYNCS ("dsync fdatasync"), SIZES ("4096 65536"),
#   DEPTHS ("1 16 64"), CAPACITY (1073741824).
#
# Same work on both sides: fio writes sequentially over the WAL's ring (after its 8 KiB
# header), already allocated and pre-zeroed, with O_DIRECT through io_uring; --sync=1 opens it
# O_DSYNC, --fdatasync=1 follows each write with an fdatasync. The WAL's concurrency (appends
# outstanding) and iodepth both equal fio's iodepth. Differences that stay: the WAL writes a
# 40-byte frame header per record and pads each write to 4 KiB (a 4 KiB record is an 8 KiB
# write on its own), and it coalesces outstanding records into fewer, larger writes. Its
# latency runs from append() to the callback; fio's is per write (in fdatasync mode the
# fdatasync is reported apart, as "fio sync p99").
set -euo pipefail

build=${1:-build}
file=${2:-$build/wal_vs_fio.wal}
secs=${SECONDS_PER_RUN:-3}
syncs=${SYNCS:-"dsync fdatasync"}
sizes=${SIZES:-"4096 65536"}
depths=${DEPTHS:-"1 16 64"}
capacity=${CAPACITY:-1073741824}
bench=$build/bench/wal_bench

command -v fio >/dev/null || { echo "wal_vs_fio: fio not found" >&2; exit 1; }
command -v python3 >/dev/null || { echo "wal_vs_fio: python3 not found" >&2; exit 1; }
[[ -x $bench ]] || { echo "wal_vs_fio: no $bench (configure with -DSILT_BENCH=ON)" >&2; exit 1; }

printf '%-9s %6s %3s | %9s %9s %6s | %9s %9s %6s | %11s\n' sync bs qd "WAL MiB/s" "fio MiB/s" \
  ratio "WAL p99" "fio p99" ratio "fio sync p99"
for sync in $syncs; do
  if [[ $sync == dsync ]]; then fio_sync=--sync=1; else fio_sync=--fdatasync=1; fi
  for bs in $sizes; do
    for qd in $depths; do
      wal_csv=$("$bench" --path "$file" --capacity "$capacity" --sync "$sync" --bs "$bs" \
        --concurrency "$qd" --iodepth "$qd" --seconds "$secs" --csv | tail -n 1)
      fio_json=$(fio --name=wal_vs_fio --filename="$file" --offset=8192 --size="$capacity" \
        --ioengine=io_uring --direct=1 --rw=write --bs="$bs" --iodepth="$qd" "$fio_sync" \
        --ramp_time=500ms --runtime="$secs" --time_based --lat_percentiles=1 \
        --output-format=json)
      python3 - "$wal_csv" "$fio_json" <<'PY'
import json, sys
wal = sys.argv[1].split(",")
sync, bs, qd = wal[0], wal[1], wal[3]
wal_mib, wal_p99 = float(wal[5]), float(wal[7])
job = json.loads(sys.argv[2])["jobs"][0]
write = job["write"]
fio_mib = write["bw"] / 1024.0
fio_p99 = write["lat_ns"]["percentile"]["99.000000"] / 1000.0
sync_p99 = "-"
pct = job.get("sync", {}).get("lat_ns", {}).get("percentile")
if sync == "fdatasync" and pct:
    sync_p99 = "%.1f" % (pct["99.000000"] / 1000.0)
ratio = lambda a, b: "%.2f" % (a / b) if b > 0 else "-"
print("%-9s %6s %3s | %9.1f %9.1f %6s | %9.1f %9.1f %6s | %11s" % (
    sync, bs, qd, wal_mib, fio_mib, ratio(wal_mib, fio_mib), wal_p99, fio_p99,
    ratio(wal_p99, fio_p99), sync_p99))
PY
    done
  done
done
