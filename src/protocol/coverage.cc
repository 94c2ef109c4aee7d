#include "protocol/coverage.h"

#include <sstream>

#include "protocol/generated/api_table.h"

namespace silt::protocol {

std::string coverage_report() {
  std::ostringstream out;
  out << "key  api                              versions  flexible\n";
  for (const auto& api : api_table) {
    std::string name(api.name);
    name.resize(32, ' ');
    out << (api.key < 10 ? "  " : (api.key < 100 ? " " : "")) << api.key << "  " << name << " "
        << api.min_version << "-" << api.max_version << (api.max_version < 10 ? "      " : "     ");
    if (api.first_flexible_version >= 0) {
      out << api.first_flexible_version << "+";
    } else {
      out << "none";
    }
    out << "\n";
  }
  out << api_table.size() << " APIs\n";
  return out.str();
}

}  // namespace silt::protocol
