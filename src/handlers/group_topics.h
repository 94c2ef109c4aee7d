// The broker's topics as the consumer groups of KIP-848 see them (coordinator::topic_lookup
// over the handlers' context): names, ids and partition counts, from its snapshots. As on
// Kafka, whose group coordinator matches regexes against every topic of its metadata image,
// the internal __consumer_offsets is one of them once it exists (offsets_topic.h).
#pragma once

#include "coordinator/consumer_group.h"
#include "handlers/context.h"
#include "handlers/offsets_topic.h"

namespace silt::handlers {

class group_topics final : public coordinator::topic_lookup {
 public:
  explicit group_topics(const context& ctx) : ctx_(ctx) {}
  [[nodiscard]] std::optional<coordinator::topic_meta> by_name(
      std::string_view name) const override {
    if (name == offsets_topic_name) return offsets_topic();
    return meta(ctx_.topic(name));
  }
  [[nodiscard]] std::optional<coordinator::topic_meta> by_id(
      const coordinator::topic_uuid& id) const override {
    if (auto o = offsets_topic(); o && o->id == id) return o;
    return meta(ctx_.topic(id));
  }
  [[nodiscard]] std::vector<coordinator::topic_meta> all() const override {
    std::vector<coordinator::topic_meta> out;
    for (const auto& t : ctx_.topics()) out.push_back(*meta(t));
    if (auto o = offsets_topic()) out.push_back(std::move(*o));
    return out;
  }
  [[nodiscard]] uint64_t version() const override {
    // (The offsets topic coming to exist moves it too.)
    return ctx_.registry.version() * 2 + (ctx_.groups().offsets_topic_exists() ? 1 : 0);
  }

 private:
  static std::optional<coordinator::topic_meta> meta(const topic_entry_ptr& t) {
    if (!t) return std::nullopt;
    return coordinator::topic_meta{t->info->id, t->info->name, t->info->partitions()};
  }
  [[nodiscard]] std::optional<coordinator::topic_meta> offsets_topic() const {
    if (!ctx_.groups().offsets_topic_exists()) return std::nullopt;
    return coordinator::topic_meta{offsets_topic_id(ctx_).bytes, std::string(offsets_topic_name),
                                   offsets_topic_partitions(ctx_)};
  }
  const context& ctx_;
};

}  // namespace silt::handlers
