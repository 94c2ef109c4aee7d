# The two commands of the README: `make run` and `make test`. Both install what is missing,
# configure and build: run only the broker and silt-perf, then starts the broker; test
# everything (unit tests, benchmarks, fuzz targets), then runs every check and test.
BUILD       ?= build
ASAN_BUILD  ?= build-asan
TSAN_BUILD  ?= build-tsan
SPECS       ?= ../shared/kafka-protocol
JOBS        ?= $(shell nproc)
CLANG_CXX   ?= clang++-14

.PHONY: all deps test-deps configure-all build build-all run test generate check-generated \
        format check-format tidy unit-tests integration asan tsan fuzz bench compat chaos clean

all: build

# What building and running need; test-deps adds what the checks, tests and benchmarks need.
deps:
	@scripts/install-deps.sh

test-deps:
	@scripts/install-deps.sh --test

# What `make build` and `make run` build.
BROKER_TARGETS = silt silt-perf
CMAKE_CONFIGURE = cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo

# A fresh build folder is configured without the unit tests and benchmarks (SILT_TESTS=OFF),
# which the broker does not need, nor their libraries, and for a quicker build
# (SILT_FAST_BUILD: line tables only as debug information, see CMakeLists.txt). Once
# configured, ninja reconfigures it itself when a CMakeLists.txt changes.
$(BUILD)/build.ninja: | deps
	@$(CMAKE_CONFIGURE) -DSILT_TESTS=OFF -DSILT_FAST_BUILD=ON >/dev/null

# The broker and silt-perf only.
build: deps $(BUILD)/build.ninja
	@ninja -C $(BUILD) -j $(JOBS) --quiet $(BROKER_TARGETS)

run: build
	$(BUILD)/silt

# Turns the unit tests and benchmarks on, and the quick build off (full debug information),
# in a build folder configured otherwise (or not yet configured): everything is then built as
# it always was, once, and `make build` keeps this configuration, building only the broker.
configure-all: test-deps
	@{ test -f $(BUILD)/build.ninja && grep -qx 'SILT_TESTS:BOOL=ON' $(BUILD)/CMakeCache.txt \
	  && ! grep -qx 'SILT_FAST_BUILD:BOOL=ON' $(BUILD)/CMakeCache.txt; } 2>/dev/null \
	  || $(CMAKE_CONFIGURE) -DSILT_TESTS=ON -DSILT_FAST_BUILD=OFF >/dev/null

# Everything: the broker, silt-perf, the unit tests and the benchmarks.
build-all: configure-all
	@ninja -C $(BUILD) -j $(JOBS) --quiet

# Regenerates the protocol code from the Kafka specs.
generate:
	python3 tools/kafka_codegen.py --specs $(SPECS)/message

# Fails when the committed generated code differs from what the specs give.
check-generated:
	@scripts/check-generated.sh $(SPECS)

format:
	@scripts/check-format.sh --fix

check-format: test-deps
	@scripts/check-format.sh

tidy: configure-all
	@scripts/run-clang-tidy.sh $(BUILD)

unit-tests: build-all
	@scripts/run-ctest.sh $(BUILD)

# Black-box tests over TCP with real clients, against Silt and the reference Kafka broker;
# then against Silt again with its metadata in PostgreSQL and its objects in Azure Blob
# containers of Azurite (silt-perf's own tests aside: they test the tool, not the stores; the
# crash checker, whose store faults are injected above any store; and the tests of the wire
# and the handshakes, which never reach a store: malformed and oversized requests, TLS and
# SASL/PLAIN listeners, connection limits, kcat and the Java clients' compatibility).
PG_SKIPPED = malformed decode_limits abuse record_validation produce_limits fetch_limits \
             topic_regex_cost parked_requests connection_limits connections tls sasl kcat \
             java_clients
integration: build-all
	@scripts/run-integration.sh $(BUILD)
	@SILT_TEST_BROKERS=silt SILT_TEST_METADATA=postgresql SILT_TEST_OBJECTS=azurite \
	  scripts/run-integration.sh $(BUILD) -k "not silt_perf and not chaos_checker" \
	  $(foreach t,$(PG_SKIPPED),--ignore=tests/integration/test_$(t).py)

# Unit tests, the black-box tests against Silt, and the fuzz targets under AddressSanitizer
# and UndefinedBehaviorSanitizer (clang). The black-box tests run here but for the long
# scenarios (clusters, chaos, failover and moves, topic churn, silt-perf runs, rebalance timing,
# store outages, Java clients): those run unsanitized in `integration`, and the code they drive
# is the same the tests run here reach.
ASAN_SKIPPED = cluster_agreement cluster_chaos cluster_secure chaos_checker topic_churn \
               silt_perf silt_perf_runs load_balance partition_moves failover \
               group_rebalance_timing store_outage java_clients rack_reads
asan: test-deps
	@CXX=$(CLANG_CXX) cmake -S . -B $(ASAN_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Debug \
	  -DSILT_SANITIZE=ON -DSILT_FUZZ=ON -DSILT_BENCH=OFF >/dev/null
	@ninja -C $(ASAN_BUILD) -j $(JOBS) --quiet
	@scripts/run-ctest.sh $(ASAN_BUILD)
	@SILT_TEST_SANITIZED=1 SILT_TEST_BROKERS=silt SILT_CLUSTER_ROUNDS=2 \
	  scripts/run-integration.sh $(ASAN_BUILD) \
	  $(foreach t,$(ASAN_SKIPPED),--ignore=tests/integration/test_$(t).py)

# Every client of tests/compat against Silt and the reference Kafka broker; rewrites the table.
compat: test-deps build
	@/usr/bin/python3 tests/compat/run.py --write docs/compatibility.md

# The crash checker, long: 500 kills, then 100 more with the object store failing for periods,
# then 100 on the three-broker cluster, with partitions moved at random.
chaos: test-deps build
	@SILT_BIN=$(BUILD)/silt /usr/bin/python3 tests/chaos/run.py --kills 500
	@SILT_BIN=$(BUILD)/silt /usr/bin/python3 tests/chaos/run.py --kills 100 --store-faults \
	  error=0.3,timeout=0.1,slow=0.2,lost=0.1,delay_ms=300,on_ms=3000,off_ms=3000
	@SILT_BIN=$(BUILD)/silt /usr/bin/python3 tests/chaos/run.py --kills 100 --cluster

# The unit tests of the concurrent parts (network server, WAL, stream store, group
# coordinator, the JWKS refresh thread) under ThreadSanitizer (clang).
TSAN_TESTS = src/net/net_tests src/storage/wal/wal_tests src/storage/storage_tests \
             src/coordinator/coordinator_tests src/security/security_tests
tsan: test-deps
	@CXX=$(CLANG_CXX) cmake -S . -B $(TSAN_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DSILT_TSAN=ON -DSILT_BENCH=OFF >/dev/null
	@ninja -C $(TSAN_BUILD) -j $(JOBS) --quiet $(TSAN_TESTS)
	@for t in $(TSAN_TESTS); do \
	  TSAN_OPTIONS=halt_on_error=1 $(TSAN_BUILD)/$$t --gtest_brief=1 >$(TSAN_BUILD)/tsan.log 2>&1 \
	    || { tail -80 $(TSAN_BUILD)/tsan.log; exit 1; }; \
	  echo "tsan: $$t passed"; done

fuzz: asan
	@scripts/run-fuzzers.sh $(ASAN_BUILD)

bench: build-all
	@for b in $(BUILD)/bench/*_bench; do $$b; done

test: test-deps check-generated check-format build-all tidy unit-tests integration fuzz tsan

clean:
	rm -rf $(BUILD) $(ASAN_BUILD)
