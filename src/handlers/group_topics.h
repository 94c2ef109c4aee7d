// The broker's topics as the consumer groups of KIP-848 see them (coordinator::topic_lookup
// over the handlers' context): names, ids and partition counts, from its snapshots.
#pragma once

#include "coordinator/consumer_group.h"
#include "handlers/context.h"

namespace silt::handlers {

class group_topics final : public coordinator::topic_lookup {
 public:
  explicit group_topics(const context& ctx) : ctx_(ctx) {}
  [[nodiscard]] std::optional<coordinator::topic_meta> by_name(
      std::string_view name) const override {
    return meta(ctx_.topic(name));
  }
  [[nodiscard]] std::optional<coordinator::topic_meta> by_id(
      const coordinator::topic_uuid& id) const override {
    return meta(ctx_.topic(id));
  }
  [[nodiscard]] std::vector<coordinator::topic_meta> all() const override {
    std::vector<coordinator::topic_meta> out;
    for (const auto& t : ctx_.topics()) out.push_back(*meta(t));
    return out;
  }
  [[nodiscard]] uint64_t version() const override { return ctx_.registry.version(); }

 private:
  static std::optional<coordinator::topic_meta> meta(const topic_entry_ptr& t) {
    if (!t) return std::nullopt;
    return coordinator::topic_meta{t->info->id, t->info->name, t->info->partitions()};
  }
  const context& ctx_;
};

}  // namespace silt::handlers
