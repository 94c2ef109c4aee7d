// The fault specs the broker takes from the environment for black-box tests of real clients
// against a failing disk or object store (SILT_TEST_WAL_FAULTS, SILT_TEST_STORE_FAULTS: see
// app/node.cc, which reads them once at open). Pure parsers: no state, thread-safe.
#pragma once

#include <string>
#include <string_view>

#include <tl/expected.hpp>

#include "storage/object/faulty_store.h"
#include "storage/wal/wal.h"

namespace silt::app {

// SILT_TEST_WAL_FAULTS, for tests of real clients against a failing disk:
// "fail=P,delay=P,delay_ms=N,seed=N" (probabilities per WAL write; any subset).
[[nodiscard]] tl::expected<storage::wal::write_faults::options, std::string> parse_wal_faults(
    std::string_view spec);

// SILT_TEST_STORE_FAULTS, for tests of real clients against a failing object store:
// "error=P,throttle=P,timeout=P,slow=P,partial=P,lost=P,delay_ms=N,seed=N,on_ms=N,off_ms=N"
// (probabilities per call; with off_ms, faults only in the first on_ms of every
// on_ms + off_ms).
[[nodiscard]] tl::expected<storage::faulty_store_options, std::string> parse_store_faults(
    std::string_view spec);

}  // namespace silt::app
