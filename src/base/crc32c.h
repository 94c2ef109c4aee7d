// CRC32C (Castagnoli), as used by Kafka record batches and Silt's WAL and object formats.
// Computed by ISA-L with the CPU's CRC and carry-less multiply instructions.
#pragma once

#include <cstdint>
#include <span>

namespace silt::base {

// The CRC32C of `data` continued from `crc` (the CRC of the bytes before it; 0 to start).
[[nodiscard]] uint32_t crc32c(std::span<const uint8_t> data, uint32_t crc = 0);

}  // namespace silt::base
