#!/usr/bin/env bash
# A single-node Ceph cluster (one monitor, one in-memory OSD, radosgw) as the S3 server the
# object store tests run against. Loopback only; every file it writes is under DIR.
#
#   s3-test-server.sh start DIR   start it (or find it running) and print `export` lines for
#                                 SILT_S3_ENDPOINT, SILT_S3_ACCESS_KEY, SILT_S3_SECRET_KEY and
#                                 SILT_S3_REGION on stdout; no bucket is created
#   s3-test-server.sh stop DIR    stop the gateway, then the OSD, then the monitor
#
# Environment: S3_PORT (gateway port, default 7480), S3_MON_PORT (monitor port, default 6789),
# S3_START_TIMEOUT (seconds to wait for each daemon, default 60), SILT_S3_MEMSTORE_BYTES (the
# OSD's in-memory store, default 2 GiB: a full one blocks every write).
# Typical use: eval "$(scripts/s3-test-server.sh start /tmp/s3)"; ...; scripts/s3-test-server.sh
# stop /tmp/s3. Logs are in DIR/log.
set -euo pipefail

usage() {
  echo "usage: $0 start|stop DIR" >&2
  exit 2
}
[[ $# -eq 2 ]] || usage
cmd=$1
[[ $cmd == stop && ! -d $2 ]] && exit 0  # nothing was ever started there
mkdir -p "$2"
dir=$(cd "$2" && pwd)
conf=$dir/ceph.conf
port=${S3_PORT:-7480}
mon_port=${S3_MON_PORT:-6789}
timeout=${S3_START_TIMEOUT:-60}
region=us-east-1
access_key=SILTTESTACCESSKEY

log() { echo "s3-test-server: $*" >&2; }
starting=0
# A failed start stops what it started: no daemons are left behind.
die() {
  log "$*"
  if ((starting)); then stop; fi
  exit 1
}

# The pid in DIR/run/NAME.pid if that process is alive and is one of ours (it was started with
# this ceph.conf), so a recycled pid is never signalled.
daemon_pid() {
  local file=$dir/run/$1.pid pid
  [[ -f $file ]] || return 1
  pid=$(<"$file")
  [[ -n $pid && -r /proc/$pid/cmdline ]] || return 1
  tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF -- "$conf" || return 1
  echo "$pid"
}

# Stops one daemon: SIGTERM, up to 30 s for it to exit, then SIGKILL.
stop_daemon() {
  local name=$1 pid i
  pid=$(daemon_pid "$name") || return 0
  kill -TERM "$pid" 2>/dev/null || return 0
  for ((i = 0; i < 300; i++)); do
    [[ -d /proc/$pid ]] || break
    sleep 0.1
  done
  if [[ -d /proc/$pid ]]; then
    log "$name did not stop within 30 s; killing it"
    kill -KILL "$pid" 2>/dev/null || true
    while [[ -d /proc/$pid ]]; do sleep 0.1; done
  fi
  rm -f "$dir/run/$name.pid"
}

# The gateway answers an anonymous ListBuckets: an S3 server, not just anything on the port.
gateway_answers() {
  curl -s -m 2 "http://127.0.0.1:$port/" | grep -q ListAllMyBucketsResult
}

# The ceph CLI, bounded in time (it waits forever for an unreachable monitor), and tried again:
# a client that sends its first command before it has the monitor map is refused with EPERM
# ("wrong fsid"). The commands used here are idempotent.
ceph_cli() {
  local i
  for ((i = 1; ; i++)); do
    timeout 30 ceph -c "$conf" "$@" && return 0
    ((i < 5)) || return 1
    sleep 0.5
  done
}
osd_up() { ceph_cli osd dump 2>/dev/null | grep -q '^osd.0 up'; }

port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# Waits (bounded) until `$@` succeeds while the daemon NAME runs; fails early when the daemon
# has exited, and on timeout names what it waited for and where to look.
wait_for() {
  local what=$1 name=$2 began=$SECONDS
  shift 2
  until "$@" >/dev/null 2>&1; do
    # A daemon writes its pid file soon after it forks; allow it a few seconds.
    if ((SECONDS - began >= 5)) && ! daemon_pid "$name" >/dev/null; then
      die "$name exited while starting (see $dir/log/$name.log)"
    fi
    if ((SECONDS - began >= timeout)); then
      die "timed out after ${timeout}s waiting for $what (see $dir/log/$name.log)"
    fi
    sleep 0.2
  done
}

print_exports() {
  cat <<EOF
export SILT_S3_ENDPOINT=http://127.0.0.1:$port
export SILT_S3_ACCESS_KEY=$access_key
export SILT_S3_SECRET_KEY=$(<"$dir/secret_key")
export SILT_S3_REGION=$region
EOF
}

write_conf() {
  local fsid=$1
  # Ceph expands $name, $id and $cluster itself; they are escaped here.
  cat >"$conf" <<EOF
[global]
fsid = $fsid
mon host = v1:127.0.0.1:$mon_port
mon initial members = a
public network = 127.0.0.0/8
cluster network = 127.0.0.0/8
ms bind ipv6 = false
ms bind msgr2 = false
auth cluster required = none
auth service required = none
auth client required = none
osd pool default size = 1
osd pool default min size = 1
osd pool default pg num = 8
osd pool default pgp num = 8
osd pool default pg autoscale mode = off
mon allow pool size one = true
mon warn on pool no redundancy = false
# A throwaway cluster: the monitor must not refuse to start because the host's disk is more
# than 95% full (its default), which says nothing about the few MiB the tests write.
mon data avail crit = 0
mon data avail warn = 0
osd crush chooseleaf type = 0
# The OSD is placed in the CRUSH map by this script; at boot it would send the same commands
# to the monitor, which refuses them ("wrong fsid") when they race ahead of the monitor map.
osd class update on start = false
osd crush update on start = false
run dir = $dir/run
admin socket = $dir/run/\$name.asok
log file = $dir/log/\$name.log
pid file = $dir/run/\$name.pid
keyring = $dir/keyring
mon data = $dir/mon/\$id
osd data = $dir/osd/\$id
osd objectstore = memstore
memstore device bytes = ${SILT_S3_MEMSTORE_BYTES:-2147483648}

[client.rgw.a]
rgw frontends = beast endpoint=127.0.0.1:$port
rgw data = $dir/rgw
# Host names under localhost (which libcurl resolves to 127.0.0.1 itself) select
# virtual-hosted addressing: http://BUCKET.localhost:PORT/KEY.
rgw dns name = localhost
# Without the lifecycle thread (which sleeps 5 s at a time) the gateway stops in about a second,
# not seven. Space of deleted objects is collected within 2 minutes, not 2 hours: the OSD
# keeps everything in memory, and a full OSD blocks every write.
rgw enable lc threads = false
rgw gc obj min wait = 60
rgw gc processor period = 60
EOF
}

start() {
  command -v ceph-mon >/dev/null && command -v radosgw >/dev/null ||
    die "Ceph is not installed (scripts/install-deps.sh installs ceph-mon ceph-osd radosgw ceph-common)"
  if daemon_pid client.rgw.a >/dev/null && daemon_pid osd.0 >/dev/null &&
    daemon_pid mon.a >/dev/null && [[ -f $dir/secret_key ]] && gateway_answers; then
    log "already running in $dir"
    print_exports
    return
  fi
  # Leftovers of a cluster that is not (fully) running: stop what is left and start afresh.
  stop
  rm -rf "$dir/run" "$dir/log" "$dir/mon" "$dir/osd" "$dir/rgw" "$dir/keyring" "$dir/monmap" \
    "$dir/secret_key" "$conf"
  mkdir -p "$dir/run" "$dir/log" "$dir/mon/a" "$dir/osd/0" "$dir/rgw"
  port_in_use "$port" && die "port $port on 127.0.0.1 is in use (choose another with S3_PORT)"
  port_in_use "$mon_port" &&
    die "port $mon_port on 127.0.0.1 is in use (choose another with S3_MON_PORT)"
  starting=1

  local began=$SECONDS fsid osd_uuid secret
  fsid=$(uuidgen)
  # The OSD's id is registered with its uuid up front, so the OSD need not register itself.
  osd_uuid=$(uuidgen)
  write_conf "$fsid"
  # Each step is &&-chained: `set -e` does not apply inside a list that ends in `||`.
  {
    monmaptool --create --add a "v1:127.0.0.1:$mon_port" --fsid "$fsid" "$dir/monmap" &&
      ceph-authtool --create-keyring "$dir/keyring" --gen-key -n mon. --cap mon 'allow *' &&
      ceph-mon -c "$conf" --mkfs -i a --monmap "$dir/monmap" --keyring "$dir/keyring" &&
      ceph-mon -c "$conf" -i a
  } >>"$dir/log/setup.log" 2>&1 || die "monitor failed to start (see $dir/log/setup.log)"
  wait_for "the monitor on 127.0.0.1:$mon_port" mon.a \
    ceph_cli mon stat

  {
    [[ $(ceph_cli osd create "$osd_uuid") == 0 ]] &&
      ceph-osd -c "$conf" -i 0 --mkfs --osd-uuid "$osd_uuid" &&
      ceph_cli osd crush add osd.0 1.0 host=localhost root=default &&
      ceph-osd -c "$conf" -i 0
  } >>"$dir/log/setup.log" 2>&1 || die "OSD failed to start (see $dir/log/setup.log)"
  wait_for "the OSD to come up" osd.0 osd_up

  radosgw -c "$conf" -n client.rgw.a >>"$dir/log/setup.log" 2>&1 ||
    die "radosgw failed to start (see $dir/log/setup.log)"
  wait_for "radosgw on 127.0.0.1:$port" client.rgw.a gateway_answers

  secret=$(head -c 30 /dev/urandom | base64 | tr -d '/+=' | head -c 40)
  radosgw-admin -c "$conf" -n client.rgw.a user create --uid=silt-test --display-name=silt-test \
    --access-key="$access_key" --secret-key="$secret" >>"$dir/log/setup.log" 2>&1 ||
    die "creating the S3 user failed (see $dir/log/setup.log)"
  echo "$secret" >"$dir/secret_key"
  starting=0
  log "started in $((SECONDS - began)) s; S3 at http://127.0.0.1:$port"
  print_exports
}

# The gateway first (it hangs on shutdown when the monitor is already gone), then the OSD, then
# the monitor; each is waited for.
stop() {
  stop_daemon client.rgw.a
  stop_daemon osd.0
  stop_daemon mon.a
}

case $cmd in
  start) start ;;
  stop) stop ;;
  *) usage ;;
esac
