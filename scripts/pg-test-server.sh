#!/usr/bin/env bash
# A throwaway PostgreSQL server (Debian's postgresql package) for the metadata store tests.
# Loopback only, trust authentication, every file under DIR; about a second to start.
#
#   pg-test-server.sh start DIR   start it (or find it running) and print an `export` line for
#                                 SILT_TEST_POSTGRES_URI (the server's `postgres` database, user
#                                 silt) on stdout; tests create their own databases in it
#   pg-test-server.sh stop DIR    stop it (fast shutdown)
#
# Environment: PG_PORT (default: a free port). Run as root, the server runs as the postgres
# user (initdb refuses root). The log is DIR/log.
set -euo pipefail

usage() {
  echo "usage: $0 start|stop DIR" >&2
  exit 2
}
[[ $# -eq 2 ]] || usage
cmd=$1
[[ $cmd == stop && ! -d $2 ]] && exit 0
mkdir -p "$2"
dir=$(cd "$2" && pwd)

bin=""
for d in /usr/lib/postgresql/*/bin; do
  [[ -x $d/initdb ]] && bin=$d
done
[[ -n $bin ]] || {
  echo "pg-test-server: no PostgreSQL server found (apt-get install postgresql)" >&2
  exit 1
}

as_server_user() {
  if [[ $(id -u) -eq 0 ]]; then
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

case $cmd in
  start)
    if [[ -f $dir/port ]] && as_server_user "$bin/pg_ctl" -D "$dir/db" status >/dev/null 2>&1; then
      port=$(<"$dir/port")
    else
      port=${PG_PORT:-$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')}
      rm -rf "$dir/db"
      [[ $(id -u) -eq 0 ]] && chown postgres "$dir"
      as_server_user "$bin/initdb" -D "$dir/db" -U silt --auth=trust -E UTF8 --no-sync \
        >"$dir/initdb.log" 2>&1 || {
        echo "pg-test-server: initdb failed (log: $dir/initdb.log)" >&2
        exit 1
      }
      # Commits are durable as in production (fsync stays on).
      as_server_user "$bin/pg_ctl" -D "$dir/db" -l "$dir/log" -w -t 30 \
        -o "-p $port -k $dir -c listen_addresses=127.0.0.1 -c max_connections=300" \
        start >/dev/null || {
        echo "pg-test-server: the server did not start (log: $dir/log)" >&2
        exit 1
      }
      echo "$port" >"$dir/port"
    fi
    echo "export SILT_TEST_POSTGRES_URI=postgresql://silt@127.0.0.1:$port/postgres"
    ;;
  stop)
    [[ -d $dir/db ]] || exit 0
    as_server_user "$bin/pg_ctl" -D "$dir/db" -m fast -w stop >/dev/null 2>&1 || true
    ;;
  *) usage ;;
esac
