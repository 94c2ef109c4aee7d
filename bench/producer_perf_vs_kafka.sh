#!/usr/bin/env bash
# Produces with Kafka's own ProducerPerformance against Silt and against the reference Apache
# Kafka broker (tests/kafka-reference.sh), and prints throughput, produce latency, broker CPU
# per GiB and broker peak RSS side by side, with the Silt/Kafka ratios.
#
# Usage: bench/producer_perf_vs_kafka.sh [--silt-bin PATH] [--records N] [--large-records N]
#          [--partitions N] [--only silt|kafka] [--workdir DIR] [--no-warmup] [--keep-data]
#          [--silt-override KEY=VALUE]... [--producer-prop KEY=VALUE]...
#   --silt-bin PATH      the Silt broker (default: build/silt)
#   --silt-override K=V  a setting for Silt (repeatable), e.g. wal.io.engine=uring
#   --producer-prop K=V  a producer setting for both workloads and brokers (repeatable),
#                        added to (and overriding) the workload's own, below
#   --records N          records of workload 1, 1 KiB unthrottled (default 6000000, ~30 s
#                        on Kafka on the idle 2-core development machine; shorter runs
#                        are dominated by the producer's first seconds; 0: skip it)
#   --large-records N    records of workload 2, 64 KiB at 800 records/s = 50 MiB/s
#                        (default 24000, 30 s; 0: skip it)
#   --partitions N       partitions of the test topic (default 1)
#   --only silt|kafka    run one broker only
#   --workdir DIR        data dirs, logs and results.json (default: build/producer-perf);
#                        must be on a real file system (not tmpfs: Silt's WAL uses O_DIRECT)
#   --no-warmup          skip the warm-up run (default: before the measured run, the same
#                        producer JVM sends the same workload with a quarter of the records
#                        to a second topic, so that neither JVM's JIT warm-up lands in the
#                        figures)
#   --keep-data          keep the brokers' data dirs (default: removed after each run)
#
# Workloads (both acks=all, batch.size=65536, one producer, no compression):
#   1. 1 KiB records, --throughput -1 (as fast as the producer goes), linger.ms=3
#   2. 64 KiB records, --throughput 800 (50 MiB/s), linger.ms=0; each record is a batch of
#      its own
# For every (broker, workload) the broker is started fresh on a free port with an empty data
# dir, the topics are created with TopicCommand, ProducerPerformance runs twice in one JVM
# (warm-up to another topic, then the measured run; see write_perf_wrapper), and the broker's
# CPU (utime+stime) is sampled just before and after the measured run; its VmHWM (which
# includes the warm-up) is read at the end; so are the producer JVM's CPU and the machine's
# (/proc/stat), to show which process the CPUs went to. Silt is also sent SIGUSR1 at both points, so
# that its log holds its own Produce timing for exactly the measured run. Silt runs with its
# defaults (the WAL makes every acknowledged batch durable); Kafka with its defaults (no
# fsync per message: acknowledged = in the page cache). The producer runs on the same
# machine and competes for its CPUs: check the load average printed with the results.
# Output: one Markdown table per workload on stdout, the same as JSON in WORKDIR/results.json,
# per-run logs in WORKDIR/<broker>-<workload>/.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
kref="$repo/tests/kafka-reference.sh"
stats="$here/broker_stats.py"

silt_bin=$repo/build/silt
silt_overrides=()
records=6000000
large_records=24000
partitions=1
only=
workdir=$repo/build/producer-perf
keep_data=0
warmup=1
topic=perf-test
# The 1 KiB workload batches (linger.ms=3, as a producer tuned for throughput does); the 64 KiB
# one measures latency: linger.ms=0, as in the lowest-latency case of the AutoMQ reports this
# compares with (with linger.ms=3 a 64 KiB record, which does not fill its batch by Kafka's
# estimate, waits out the linger in the producer unless the next record comes first).
w1_props="acks=all linger.ms=3 batch.size=65536"
w2_props="acks=all linger.ms=0 batch.size=65536"
extra_props=

die() { echo "producer_perf_vs_kafka: $*" >&2; exit 1; }
log() { echo "== $*" >&2; }
usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2; exit 2; }

while [[ $# -gt 0 ]]; do
  case "$1" in
    --silt-bin) silt_bin=$2; shift 2 ;;
    --silt-override) silt_overrides+=(--override "$2"); shift 2 ;;
    --producer-prop) extra_props+=" $2"; shift 2 ;;
    --records) records=$2; shift 2 ;;
    --large-records) large_records=$2; shift 2 ;;
    --partitions) partitions=$2; shift 2 ;;
    --only) only=$2; shift 2 ;;
    --workdir) workdir=$2; shift 2 ;;
    --keep-data) keep_data=1; shift ;;
    --no-warmup) warmup=0; shift ;;
    -h|--help) usage ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
done
[[ $records =~ ^[0-9]+$ && $large_records =~ ^[0-9]+$ && $partitions =~ ^[0-9]+$ ]] \
  || die "--records, --large-records and --partitions take numbers"
case "$only" in
  "") brokers="silt kafka" ;;
  silt|kafka) brokers=$only ;;
  *) die "--only takes silt or kafka" ;;
esac
command -v python3 >/dev/null || die "python3 not found"
command -v java >/dev/null || die "java not found (the Kafka tools need a JDK >= 17)"
if [[ " $brokers " == *" silt "* ]]; then
  [[ -x $silt_bin ]] || die "no Silt binary at $silt_bin (build it, or --only kafka)"
  silt_bin=$(cd "$(dirname "$silt_bin")" && pwd)/$(basename "$silt_bin")
fi

mkdir -p "$workdir"
workdir=$(cd "$workdir" && pwd)
fstype=$(findmnt -no FSTYPE -T "$workdir")
[[ $fstype != tmpfs && $fstype != ramfs ]] \
  || die "$workdir is on $fstype: use a dir on a real disk (O_DIRECT, and a fair comparison)"
"$kref" install

# --- cleanup: whatever is running when we exit (normally, on error, on Ctrl-C) -------------
perf_pid=
tail_pid=
silt_pid=
kafka_dir=
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  [[ -z $tail_pid ]] || kill "$tail_pid" 2>/dev/null || true
  if [[ -n $perf_pid ]] && kill -0 "$perf_pid" 2>/dev/null; then
    kill "$perf_pid" 2>/dev/null || true
    wait "$perf_pid" 2>/dev/null || true
  fi
  stop_silt
  if [[ -n $kafka_dir ]]; then
    "$kref" stop "$kafka_dir" || true
    kafka_dir=
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

stop_silt() {
  [[ -n $silt_pid ]] || return 0
  local i
  kill "$silt_pid" 2>/dev/null || true
  for ((i = 0; i < 300; i++)); do
    kill -0 "$silt_pid" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$silt_pid" 2>/dev/null; then
    echo "producer_perf_vs_kafka: silt pid $silt_pid did not stop in 30s, killing" >&2
    kill -9 "$silt_pid" 2>/dev/null || true
  fi
  wait "$silt_pid" 2>/dev/null || true
  silt_pid=
}

# start_broker BROKER DIR PORT: sets broker_pid, or returns 1.
start_broker() {
  local broker=$1 dir=$2 port=$3 i
  if [[ $broker == silt ]]; then
    mkdir -p "$dir/data"
    "$silt_bin" --override "listeners=PLAINTEXT://127.0.0.1:$port" \
      --override "data.dir=$dir/data" "${silt_overrides[@]}" >"$dir/silt.log" 2>&1 </dev/null &
    silt_pid=$!
    for ((i = 0; i < 600; i++)); do
      port_open "$port" && break
      if ! kill -0 "$silt_pid" 2>/dev/null; then
        wait "$silt_pid" 2>/dev/null || true
        silt_pid=
        tail -n 20 "$dir/silt.log" >&2
        echo "producer_perf_vs_kafka: silt exited during startup (log: $dir/silt.log)" >&2
        return 1
      fi
      sleep 0.1
    done
    if ! port_open "$port"; then
      stop_silt
      echo "producer_perf_vs_kafka: silt did not listen on $port within 60s" >&2
      return 1
    fi
    broker_pid=$silt_pid
  else
    kafka_dir=$dir
    "$kref" start "$dir" "$port" || return 1
    broker_pid=$(<"$dir/kafka.pid")
  fi
}

stop_broker() {
  if [[ $1 == silt ]]; then
    stop_silt
  elif [[ -n $kafka_dir ]]; then
    "$kref" stop "$kafka_dir"
    kafka_dir=
  fi
}

# create_topic BROKER DIR PORT TOPIC: 0 when created (or, for Silt, left to auto-creation).
create_topic() {
  local broker=$1 dir=$2 port=$3 t=$4
  if "$kref" tool org.apache.kafka.tools.TopicCommand --bootstrap-server "127.0.0.1:$port" \
      --create --topic "$t" --partitions "$partitions" --replication-factor 1 \
      >"$dir/topic-$t.log" 2>&1; then
    return 0
  fi
  cat "$dir/topic-$t.log" >&2
  [[ $broker == silt ]] || return 1
  log "silt: TopicCommand --create $t failed; relying on auto-creation of the topic"
  [[ $t != "$topic" ]] || topic_auto=1
}

# ProducerPerformance, twice in one JVM: the warm-up run (to another topic), then a hook
# command (which samples the broker's and the machine's CPU), then the measured run, then a
# second hook (the same samples again). One JVM, so that the producer's JIT warm-up stays out
# of the measured latencies too. The JVM prints its own CPU time over the measured run.
write_perf_wrapper() {
  cat >"$workdir/ProducerPerfWarm.java" <<'JAVA'
import java.lang.management.ManagementFactory;
import java.util.Arrays;
import org.apache.kafka.tools.ProducerPerformance;

// Args: WARMUP_TOPIC WARMUP_RECORDS HOOK_BEFORE HOOK_AFTER PRODUCER_PERFORMANCE_ARGS...
public class ProducerPerfWarm {
    static void hook(String cmd) throws Exception {
        int rc = new ProcessBuilder("/bin/sh", "-c", cmd).inheritIO().start().waitFor();
        if (rc != 0) throw new RuntimeException("hook failed: " + cmd);
    }

    public static void main(String[] a) throws Exception {
        String[] perf = Arrays.copyOfRange(a, 4, a.length);
        if (Long.parseLong(a[1]) > 0) {
            String[] warm = perf.clone();
            for (int i = 0; i + 1 < warm.length; i++) {
                if (warm[i].equals("--topic")) warm[i + 1] = a[0];
                if (warm[i].equals("--num-records")) warm[i + 1] = a[1];
            }
            System.out.println("warm-up: " + a[1] + " records to " + a[0] + " (not measured)");
            ProducerPerformance.main(warm);
        }
        com.sun.management.OperatingSystemMXBean os =
            (com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean();
        hook(a[2]);
        System.out.println("measured run:");
        System.out.flush();
        long cpu0 = os.getProcessCpuTime();
        ProducerPerformance.main(perf);
        long cpu1 = os.getProcessCpuTime();
        hook(a[3]);
        System.out.printf("producer cpu seconds: %.2f%n", (cpu1 - cpu0) / 1e9);
    }
}
JAVA
}

# run_perf LOG PORT TOPIC RECORD_SIZE NUM_RECORDS THROUGHPUT WARMUP_RECORDS HOOK_BEFORE
#   HOOK_AFTER PRODUCER_PROPS: the output in LOG and (indented) on stderr; returns the exit
#   status.
run_perf() {
  local out=$1 port=$2 t=$3 size=$4 n=$5 tput=$6 warm=$7 before=$8 after=$9 props=${10} rc=0
  : >"$out"
  # shellcheck disable=SC2086
  KAFKA_TOOL_HEAP_OPTS=${KAFKA_TOOL_HEAP_OPTS:--Xmx512m} "$kref" tool \
    "$workdir/ProducerPerfWarm.java" "$t-warmup" "$warm" "$before" "$after" \
    --topic "$t" --num-records "$n" --record-size "$size" --throughput "$tput" \
    --producer-props "bootstrap.servers=127.0.0.1:$port" $props \
    >"$out" 2>&1 </dev/null &
  perf_pid=$!
  # In the background, so that a signal to this script runs the trap at once.
  tail -n +1 -f --pid="$perf_pid" "$out" > >(sed -u 's/^/   /' >&2) &
  tail_pid=$!
  wait "$perf_pid" || rc=$?
  perf_pid=
  wait "$tail_pid" || true
  tail_pid=
  return "$rc"
}

# run_one BROKER WORKLOAD TITLE RECORD_SIZE NUM_RECORDS THROUGHPUT PRODUCER_PROPS: writes
# runs/<n>.json.
run_seq=0
run_one() {
  local broker=$1 workload=$2 title=$3 size=$4 n=$5 tput=$6 props=$7
  local dir="$workdir/$broker-$workload" port out err= warm=0
  topic_auto=0
  [[ $warmup -eq 0 ]] || warm=$((n / 4))
  run_seq=$((run_seq + 1))
  out="$workdir/runs/$(printf '%02d' "$run_seq")-$broker-$workload.json"
  rm -rf "$dir"
  mkdir -p "$dir"
  port=$(python3 "$stats" free-port)
  log "$broker, $title: starting the broker on 127.0.0.1:$port (dir $dir)"
  if ! start_broker "$broker" "$dir" "$port"; then
    err="broker did not start (logs in $dir)"
  elif ! create_topic "$broker" "$dir" "$port" "$topic"; then
    err="TopicCommand --create failed (log: $dir/topic-$topic.log)"
  elif [[ $warm -gt 0 ]] && ! create_topic "$broker" "$dir" "$port" "$topic-warmup"; then
    err="TopicCommand --create failed (log: $dir/topic-$topic-warmup.log)"
  fi
  local cpu0=0 cpu1=0 hwm=0 stat=
  if [[ -z $err ]]; then
    log "$broker, $title: ProducerPerformance, $n records of $size bytes, throughput $tput" \
      "(after $warm warm-up records)"
    local perf_rc=0
    local before="python3 '$stats' cpu $broker_pid >'$dir/cpu0' && python3 '$stats' procstat >'$dir/stat0'"
    local after="python3 '$stats' cpu $broker_pid >'$dir/cpu1' && python3 '$stats' procstat >'$dir/stat1'"
    # Silt logs its request timing on SIGUSR1: at the start and the end of the measured run.
    if [[ $broker == silt ]]; then
      before+=" && kill -USR1 $broker_pid"
      after+=" && kill -USR1 $broker_pid"
    fi
    run_perf "$dir/perf.log" "$port" "$topic" "$size" "$n" "$tput" "$warm" "$before" "$after" \
      "$props" ||
      perf_rc=$?
    if [[ $broker == silt ]]; then sleep 0.2; fi
    if kill -0 "$broker_pid" 2>/dev/null; then
      hwm=$(python3 "$stats" hwm "$broker_pid")
    else
      err="the broker died during the run (logs in $dir)"
    fi
    [[ -s $dir/cpu0 ]] && cpu0=$(<"$dir/cpu0")
    [[ -s $dir/cpu1 ]] && cpu1=$(<"$dir/cpu1")
    [[ -s $dir/stat0 && -s $dir/stat1 ]] && stat="$(<"$dir/stat0") $(<"$dir/stat1")"
    [[ $perf_rc -eq 0 || -n $err ]] || err="ProducerPerformance exited with $perf_rc (log: $dir/perf.log)"
  fi
  stop_broker "$broker" || true
  [[ $keep_data -eq 1 ]] || rm -rf "$dir/data"
  sync
  local cpu
  cpu=$(python3 -c "print(f'{$cpu1 - $cpu0:.2f}')")
  local extra=()
  [[ -z $err ]] || extra=("error=$err")
  python3 "$stats" record "$out" broker="$broker" workload="$workload" title="$title" \
    record_size="$size" records="$n" throughput_limit="$tput" warmup_records="$warm" \
    producer_props="$props" \
    topic_auto_created="$topic_auto" broker_log="$dir/silt.log" \
    port="$port" \
    cpu_seconds="$cpu" peak_rss_kib="$hwm" perf_log="$dir/perf.log" procstat="$stat" \
    "${extra[@]}"
  [[ -z $err ]] || log "$broker, $title: FAILED: $err"
}

rm -rf "$workdir/runs"
mkdir -p "$workdir/runs"
write_perf_wrapper
started=$(date -u +%Y-%m-%dT%H:%M:%SZ)
load0=$(cut -d' ' -f1-3 /proc/loadavg)
w1_title="1 KiB records, unthrottled, $records records"
w2_title="64 KiB records at 800 records/s (50 MiB/s), $large_records records"
for broker in $brokers; do
  [[ $records -eq 0 ]] || run_one "$broker" 1k-unthrottled "$w1_title" 1024 "$records" -1 \
    "$w1_props$extra_props"
  [[ $large_records -eq 0 ]] || run_one "$broker" 64k-50mibps "$w2_title" 65536 "$large_records" 800 \
    "$w2_props$extra_props"
done

dev=$(findmnt -no SOURCE -T "$workdir")
disk=$(lsblk -dno NAME,SIZE,MODEL "$dev" 2>/dev/null | tr -s ' ' | sed 's/ $//' || true)
machine="$(nproc) CPUs ($(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -n1)),"
machine+=" $(awk '/MemTotal/ {printf "%.0f GiB RAM", $2 / 1048576}' /proc/meminfo),"
machine+=" workdir on ${disk:-$dev} ($fstype), kernel $(uname -r),"
machine+=" load average at start $load0"
commit=$(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo unknown)
git -C "$repo" diff --quiet HEAD 2>/dev/null || commit+=" (dirty tree)"
echo
python3 "$stats" report "$workdir/runs" "$workdir/results.json" date="$started" \
  commit="$commit" machine="$machine" partitions="$partitions" \
  warmup="$warmup" java="$(java -version 2>&1 | head -n1)" \
  kafka_version="${KAFKA_VERSION:-4.1.1}" silt_bin="$silt_bin"
echo
echo "(JSON: $workdir/results.json; logs: $workdir/<broker>-<workload>/)"
