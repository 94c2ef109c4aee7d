#include "base/crc32c.h"

#include <algorithm>
#include <climits>

#include <isa-l.h>

namespace silt::base {

uint32_t crc32c(std::span<const uint8_t> data, uint32_t crc) {
  // ISA-L takes and returns the CRC register without the final inversion.
  uint32_t reg = ~crc;
  const uint8_t* p = data.data();
  size_t left = data.size();
  while (left > 0) {
    const size_t n = std::min<size_t>(left, INT_MAX);
    reg = crc32_iscsi(const_cast<uint8_t*>(p), static_cast<int>(n), reg);
    p += n;
    left -= n;
  }
  return ~reg;
}

}  // namespace silt::base
