// The client quota store: the quotas of kafka-configs.sh --entity-type users/clients
// (AlterClientQuotas; table client_quotas, docs/formats/metadata.md), so that every broker on
// one metadata store enforces the same quotas, whichever broker the change went through.
//
// The broker holds the quotas in memory for the request path (handlers/client_quotas.h); this
// store is where they last: alter() writes a change in one transaction, refresh() reads every
// quota again once another broker changed them (one read of the `quotas_changed` counter while
// nothing changed; the node's follow loop calls it every round). Every call blocks on the
// database: on the blocking pool or the follow loop's thread, never a network thread.
// Thread-safe (db_mu_ serialises the connection).
#pragma once

#include <compare>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <tl/expected.hpp>

#include "base/mutex.h"
#include "metadata/sql.h"

namespace silt::metadata {

// One part of a quota entity (its user or its client id): not part of it, the default
// (kafka-configs' `<default>`, a null name on the wire) or a name.
struct quota_entity_part {
  enum class kind : uint8_t { absent = 0, default_name = 1, named = 2 };
  kind k = kind::absent;
  std::string name;  // kind::named only

  static quota_entity_part absent() { return {}; }
  static quota_entity_part default_name() { return {.k = kind::default_name, .name = {}}; }
  static quota_entity_part named(std::string n) { return {.k = kind::named, .name = std::move(n)}; }
  [[nodiscard]] bool present() const { return k != kind::absent; }
  auto operator<=>(const quota_entity_part&) const = default;
};

// What a quota applies to: a user, a client id, or both (Kafka's ClientQuotaEntity without
// "ip", which Silt does not keep).
struct quota_entity {
  quota_entity_part user;
  quota_entity_part client_id;
  auto operator<=>(const quota_entity&) const = default;
};

// Each entity's quotas by key (producer_byte_rate, consumer_byte_rate, request_percentage).
using quota_values = std::map<std::string, double>;
using quota_map = std::map<quota_entity, quota_values>;

// One change: `value` set, or (nullopt) the key removed.
struct quota_change {
  quota_entity entity;
  std::string key;
  std::optional<double> value;
};

class quota_store {
 public:
  // Opens the store in `db`.
  [[nodiscard]] static tl::expected<std::unique_ptr<quota_store>, std::string> open(
      std::shared_ptr<sql::database> db);
  ~quota_store();
  quota_store(const quota_store&) = delete;
  quota_store& operator=(const quota_store&) = delete;

  // Every quota as stored.
  [[nodiscard]] tl::expected<quota_map, std::string> load() EXCLUDES(db_mu_);
  // Applies `changes` in order, in one transaction.
  [[nodiscard]] tl::expected<void, std::string> alter(std::span<const quota_change> changes)
      EXCLUDES(db_mu_);
  // Every quota, when another broker changed them since the last load(), alter() or
  // refresh(); none when nothing changed.
  [[nodiscard]] tl::expected<std::optional<quota_map>, std::string> refresh() EXCLUDES(db_mu_);

 private:
  quota_store(std::shared_ptr<sql::database> db, std::unique_ptr<sql::connection> c)
      : db_(std::move(db)), c_(std::move(c)) {}
  tl::expected<quota_map, std::string> read_all_locked() REQUIRES(db_mu_);

  base::mutex db_mu_;
  std::shared_ptr<sql::database> db_;
  std::unique_ptr<sql::connection> c_ GUARDED_BY(db_mu_);
  int64_t seen_ GUARDED_BY(db_mu_) = -1;  // the counter value the last read reflects
};

}  // namespace silt::metadata
