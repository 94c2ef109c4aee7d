#!/usr/bin/env bash
# Installs the Debian packages that building and running the broker and silt-perf need
# (`make build`, `make run`); with --test, also those its checks, unit tests, benchmarks and
# black-box tests need (`make test`).
# Idempotent and silent when everything is already present; uses apt-get (needs root or sudo).
set -euo pipefail

packages=(
  # toolchain
  build-essential cmake ninja-build pkg-config ccache
  # the broker's libraries
  libboost1.81-dev liburing-dev libssl-dev libcurl4-openssl-dev
  zlib1g-dev libzstd-dev liblz4-dev libsnappy-dev libisal-dev
  libsqlite3-dev libpq-dev libexpected-dev libpugixml-dev
  # RE2: subscription patterns from clients, matched in linear time as Kafka matches them
  libre2-dev
  # built with the broker: silt-perf (perf/), its JSON results and its workload files
  librdkafka-dev nlohmann-json3-dev libyaml-cpp-dev
  # the client the README's first session uses
  kcat
)
test_packages=(
  # the unit tests and benchmarks (CMake's SILT_TESTS and SILT_BENCH)
  libgtest-dev libgmock-dev libbenchmark-dev
  # the scripts of the checks and tests, and the protocol code generator (`make generate`)
  python3
  # clang: format and tidy checks, the sanitizer and fuzzing build
  clang-14 clang-format-14 clang-tidy-14 libclang-rt-14-dev
  # the WAL benchmark's baseline, and the browser that checks silt-perf's HTML report
  fio chromium
  # black-box integration tests (tests/integration): Python clients with every codec, and
  # the JDK and Maven that fetch and run the reference Kafka broker
  python3-pytest python3-pytest-timeout python3-pytest-xdist python3-confluent-kafka python3-kafka
  python3-lz4 python3-snappy python3-zstandard python3-crc32c
  # the metrics endpoint's test parses a scrape with Prometheus' own Python parser
  python3-prometheus-client
  # the OAUTHBEARER tests sign their own JWTs
  python3-jwt python3-cryptography
  # certificates: the TLS tests' and those of the secure cluster (cluster.sh up --secure)
  openssl
  # the compatibility matrix (tests/compat): a venv for the newest Python clients from PyPI
  # (its Go and Node.js clients come from the Go module proxy and npm)
  python3-venv
  openjdk-17-jdk-headless maven
  # the S3 server the object store tests run against (Ceph radosgw, checks SigV4), and curl,
  # with which the test server scripts see that their servers answer
  ceph-mon ceph-osd radosgw ceph-common curl
  # the PostgreSQL server the metadata store tests run against (initdb in a temp folder)
  postgresql
)
case "${1:-}" in
  "") ;;
  --test)
    packages+=("${test_packages[@]}")
    # npm fetches Azurite, the Azure Blob server of the tests (azurite-test-server.sh). Any
    # Node.js will do: Debian's unless one is installed already.
    command -v npm >/dev/null || packages+=(nodejs npm)
    # The Go clients of the compatibility matrix: Debian's Go unless one is installed already.
    command -v go >/dev/null || packages+=(golang-go)
    ;;
  *) echo "usage: $0 [--test]" >&2; exit 2 ;;
esac

missing=()
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$p")
done
[[ ${#missing[@]} -eq 0 ]] && exit 0

sudo=""
[[ $(id -u) -eq 0 ]] || sudo="sudo"
echo "install-deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
