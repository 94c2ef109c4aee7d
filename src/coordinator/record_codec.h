// Pieces of the group records' encoding (docs/formats/group-record.md) that both kinds use.
#pragma once

#include <optional>
#include <string>

#include "protocol/writer.h"

namespace silt::coordinator {

// A STRING? of the record format: compact, null when absent.
inline void put_optional(protocol::writer& w, const std::optional<std::string>& s) {
  if (s) {
    w.string(*s, true);
  } else {
    w.null_string(true);
  }
}

}  // namespace silt::coordinator
