#!/usr/bin/env bash
# A throwaway Azure Blob Storage server (Azurite, from npm) for the Azure store's tests.
# Loopback only, Azurite's well-known development account (devstoreaccount1), which checks
# Shared Key signatures; every file under DIR.
#
#   azurite-test-server.sh install     fetch Azurite with npm into $SILT_CACHE (once)
#   azurite-test-server.sh start DIR   install, start it (or find it running) and print
#                                      `export` lines for SILT_AZURE_ENDPOINT,
#                                      SILT_AZURE_ACCOUNT and SILT_AZURE_KEY on stdout
#   azurite-test-server.sh stop DIR    stop it
#
# Environment: AZURITE_VERSION (default 3.35.0), AZURITE_PORT (default: a free port),
# SILT_CACHE (default $HOME/.cache/silt). The log is DIR/log.
set -euo pipefail

version=${AZURITE_VERSION:-3.35.0}
cache=${SILT_CACHE:-$HOME/.cache/silt}
home=$cache/azurite-$version
bin=$home/node_modules/.bin/azurite-blob
# Azurite's development account: a published name and key, not a secret.
account=devstoreaccount1
key='Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=='

die() {
  echo "azurite-test-server: $*" >&2
  exit 1
}

install() {
  [[ -x $bin && -f $home/.installed ]] && return 0
  command -v npm >/dev/null || die "npm is missing (scripts/install-deps.sh --test installs it)"
  mkdir -p "$home"
  npm install --silent --no-audit --no-fund --prefix "$home" "azurite@$version" \
    >"$home/install.log" 2>&1 || die "npm install azurite@$version failed (log: $home/install.log)"
  [[ -x $bin ]] || die "npm installed no azurite-blob under $home"
  touch "$home/.installed"
}

running() {
  [[ -f $dir/pid ]] && kill -0 "$(<"$dir/pid")" 2>/dev/null
}

answers() {
  # Any HTTP answer will do (an unsigned request gets 403).
  curl -s -o /dev/null --max-time 2 "http://127.0.0.1:$1/$account?comp=list"
}

print_env() {
  local port=$1
  echo "export SILT_AZURE_ENDPOINT=http://127.0.0.1:$port/$account"
  echo "export SILT_AZURE_ACCOUNT=$account"
  echo "export SILT_AZURE_KEY='$key'"
}

cmd=${1:-}
case $cmd in
  install)
    install
    exit 0
    ;;
  start | stop) [[ $# -eq 2 ]] || die "usage: $0 start|stop DIR" ;;
  *) die "usage: $0 install | start DIR | stop DIR" ;;
esac
[[ $cmd == stop && ! -d $2 ]] && exit 0
mkdir -p "$2"
dir=$(cd "$2" && pwd)

case $cmd in
  start)
    if running && [[ -f $dir/port ]] && answers "$(<"$dir/port")"; then
      print_env "$(<"$dir/port")"
      exit 0
    fi
    install
    port=${AZURITE_PORT:-$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')}
    rm -rf "$dir/data"
    mkdir -p "$dir/data"
    setsid "$bin" --blobHost 127.0.0.1 --blobPort "$port" --location "$dir/data" \
      --skipApiVersionCheck --disableProductStyleUrl --disableTelemetry >"$dir/log" 2>&1 </dev/null &
    echo $! >"$dir/pid"
    echo "$port" >"$dir/port"
    for _ in $(seq 1 150); do
      if answers "$port"; then
        print_env "$port"
        exit 0
      fi
      running || die "Azurite exited (log: $dir/log)"
      sleep 0.2
    done
    die "Azurite did not answer on 127.0.0.1:$port within 30 s (log: $dir/log)"
    ;;
  stop)
    if running; then
      pid=$(<"$dir/pid")
      kill "$pid" 2>/dev/null || true
      for _ in $(seq 1 50); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
      done
      kill -9 "$pid" 2>/dev/null || true
    fi
    rm -f "$dir/pid"
    ;;
esac
