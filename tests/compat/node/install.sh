#!/usr/bin/env bash
# Installs the Node.js clients of the compatibility matrix (kafkajs and
# @confluentinc/kafka-javascript, exact versions in package.json / package-lock.json here)
# into OUTDIR, outside the source tree. Prints nothing on success; silent and quick when
# OUTDIR already holds this lockfile's install.
#
#   tests/compat/node/install.sh OUTDIR        e.g. ~/.cache/silt/compat-node
#
# Run a driver (one process per step, see tests/compat/README.md):
#
#   NODE_PATH=OUTDIR/node_modules node tests/compat/node/kafkajs.js   --bootstrap HOST:PORT COMMAND ARGS...
#   NODE_PATH=OUTDIR/node_modules node tests/compat/node/confluent.js --bootstrap HOST:PORT COMMAND ARGS...
#
# @confluentinc/kafka-javascript is librdkafka with a native addon. Its install script first
# downloads a prebuilt addon from GitHub, which cannot be reached here; it then builds from
# source with node-gyp. Its default source build (static) downloads the sources of zlib,
# OpenSSL, zstd and curl, which fails offline too, and linking to Debian's librdkafka
# (BUILD_LIBRDKAFKA=0) fails to compile (librdkafka-dev 2.0.2 is older than the API the addon
# uses). So this builds the librdkafka bundled in the npm package (2.15.1 for 1.10.1) as a
# shared library next to the addon (CKJS_LINKING=dynamic: rpath $ORIGIN/../deps), against
# Debian's zlib, OpenSSL, zstd, lz4 and curl: build-essential, python3, pkg-config,
# zlib1g-dev libssl-dev libzstd-dev liblz4-dev libcurl4-openssl-dev (scripts/install-deps.sh
# --test installs them) and Node.js's headers (/usr/include/node). About 2-3 minutes on two
# cores. The log is OUTDIR/install.log.
set -euo pipefail

die() {
  echo "compat/node/install.sh: $*" >&2
  exit 1
}

[[ $# -eq 1 ]] || die "usage: $0 OUTDIR"
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
command -v node >/dev/null && command -v npm >/dev/null ||
  die "node and npm are missing (scripts/install-deps.sh --test installs them)"
mkdir -p "$1"
out=$(cd "$1" && pwd)
case "$out/" in
  "$here"/*) die "OUTDIR must be outside $here" ;;
esac

# What the install is of: the lockfile and the Node.js ABI the addon is built for.
want="$(sha256sum <"$here/package-lock.json" | cut -d' ' -f1) $(node -p 'process.versions.modules')"
stamp=$out/.installed
if [[ -f $stamp && "$(<"$stamp")" == "$want" && -d $out/node_modules/kafkajs ]]; then
  exit 0
fi
rm -f "$stamp"
cp "$here/package.json" "$here/package-lock.json" "$out/"

# node-gyp needs Node.js's headers; without a local copy it would download them.
if [[ -z ${npm_config_nodedir:-} && -z ${NPM_CONFIG_NODEDIR:-} ]]; then
  nodeinc=$(node -p 'require("path").resolve(process.execPath, "../../include/node")')
  [[ -f $nodeinc/node.h ]] ||
    die "no Node.js headers at $nodeinc (Debian: apt-get install libnode-dev)"
  export npm_config_nodedir=${nodeinc%/include/node}
fi

log=$out/install.log
if ! (cd "$out" && CKJS_LINKING=dynamic npm ci --no-audit --no-fund \
  --foreground-scripts --loglevel=warn) >"$log" 2>&1; then
  tail -n 30 "$log" >&2
  die "npm ci failed in $out (log: $log)"
fi

# The codecs the drivers claim must be there: librdkafka turns off what it finds no library for.
if ! features=$(cd "$out" && node -p \
  'require("@confluentinc/kafka-javascript").features.join(" ")' 2>>"$log"); then
  tail -n 10 "$log" >&2
  die "@confluentinc/kafka-javascript does not load (log: $log)"
fi
for f in gzip snappy lz4 zstd; do
  [[ " $features " == *" $f "* ]] ||
    die "librdkafka was built without $f (features: $features); install zlib1g-dev libzstd-dev liblz4-dev and run again"
done
echo "$want" >"$stamp"
