#include "handlers/access.h"

namespace silt::handlers {

int32_t access::operations(security::acl_resource_type type, std::string_view name) const {
  if (snapshot_) return snapshot_->authorized_operations(who_, type, name);
  // No authorizer: every operation Kafka supports on the type.
  int32_t bits = 0;
  for (const auto op : security::supported_operations(type)) bits |= 1 << static_cast<int>(op);
  return bits;
}

}  // namespace silt::handlers
