// A printable summary of the Kafka APIs this build's codecs cover.
#pragma once

#include <string>

namespace silt::protocol {

// One line per API in the generated table: key, name, versions, first flexible version.
[[nodiscard]] std::string coverage_report();

}  // namespace silt::protocol
