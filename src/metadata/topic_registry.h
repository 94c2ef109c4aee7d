// The topic registry: topics, their partitions (each a stream of the stream store), their
// config overrides, and the broker's own durable counters (cluster id, producer id blocks).
//
// Stored through sql::database (SQLite by default, PostgreSQL for a cluster), next to the
// stream catalog's tables; every change is one transaction, durable when the call returns,
// and blocks on the database (run changes on the blocking pool, never a network thread). Readers
// get immutable snapshots (shared_ptr<const topic_info>) so that the request path never holds a
// lock while it uses one. Thread-safe: db_mu_ guards the database handle and serialises changes,
// mu_ the in-memory maps (lookups take only mu_).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <tl/expected.hpp>

#include "base/ids.h"
#include "base/mutex.h"
#include "metadata/sql.h"

namespace silt::metadata {

using topic_id = std::array<uint8_t, 16>;

struct topic_info {
  std::string name;
  topic_id id{};
  std::vector<base::stream_id> streams;        // stream id of each partition, by partition index
  std::map<std::string, std::string> configs;  // overrides of the topic configs
  int64_t created_ms = 0;
  [[nodiscard]] int32_t partitions() const { return static_cast<int32_t>(streams.size()); }
  // The stream of partition `p`, or none when the topic has no such partition.
  [[nodiscard]] std::optional<base::stream_id> stream_of(base::partition_id p) const {
    if (p.value() < 0 || p.value() >= partitions()) return std::nullopt;
    return streams[static_cast<size_t>(p.value())];
  }
};

enum class registry_error : uint8_t {
  exists,     // a topic of that name exists
  not_found,  // no topic of that name
  invalid,    // e.g. fewer partitions than the topic has
  io,         // the database failed (logged)
};

using topic_ptr = std::shared_ptr<const topic_info>;

// What refresh() found changed in the database since this registry last looked.
struct topic_changes {
  std::vector<topic_ptr> changed;  // created, grown or reconfigured, as they are now
  std::vector<topic_ptr> removed;  // deleted (or deleted and created again: then in both)
  // The change counter's value the registry reflects now: every change up to it is in.
  int64_t version = 0;
};

class topic_registry {
 public:
  // Opens the registry in `db` and loads every topic.
  [[nodiscard]] static tl::expected<std::unique_ptr<topic_registry>, std::string> open(
      std::shared_ptr<sql::database> db);
  // The same on open_database(uri); a bare path is an SQLite database.
  [[nodiscard]] static tl::expected<std::unique_ptr<topic_registry>, std::string> open(
      const std::string& uri);
  ~topic_registry();
  topic_registry(const topic_registry&) = delete;
  topic_registry& operator=(const topic_registry&) = delete;

  [[nodiscard]] topic_ptr find(std::string_view name) const;
  [[nodiscard]] topic_ptr find(const topic_id& id) const;
  // Every topic, by name.
  [[nodiscard]] std::vector<topic_ptr> all() const;
  // Changes whenever a topic is indexed or forgotten (created, grown, reconfigured, deleted):
  // what was derived from the topics at one version holds until it moves.
  [[nodiscard]] uint64_t version() const { return version_.load(std::memory_order_acquire); }
  // The change counter's value at the last change this registry made (0: none): once every
  // other broker's registry reflects it (refresh()), they all know of this one's changes.
  [[nodiscard]] int64_t last_change() const { return last_change_.load(std::memory_order_acquire); }

  // Creates a topic with fresh streams for its partitions and a random id.
  [[nodiscard]] tl::expected<topic_ptr, registry_error> create(
      const std::string& name, int32_t partitions,
      const std::map<std::string, std::string>& configs);
  // Grows a topic to `total` partitions (new streams for the new ones).
  [[nodiscard]] tl::expected<topic_ptr, registry_error> add_partitions(const std::string& name,
                                                                       int32_t total);
  // Forgets a topic and returns what it was (its streams are the caller's to free).
  [[nodiscard]] tl::expected<topic_ptr, registry_error> remove(const std::string& name);
  // Replaces a topic's config overrides.
  [[nodiscard]] tl::expected<topic_ptr, registry_error> set_configs(
      const std::string& name, const std::map<std::string, std::string>& configs);

  // The cluster id: `preferred` if not empty and none is stored yet, else the stored one,
  // else a fresh random one (Kafka's 22-character base64 form); stored once.
  [[nodiscard]] tl::expected<std::string, registry_error> cluster_id(const std::string& preferred);
  // Takes in the topic changes other registries (other brokers) made in the database: one
  // read of a change counter when nothing changed, else every topic is read again.
  [[nodiscard]] tl::expected<topic_changes, registry_error> refresh();

  // Reserves `count` producer ids and returns the first; never hands out an id twice.
  [[nodiscard]] tl::expected<int64_t, registry_error> allocate_producer_ids(int64_t count);

 private:
  topic_registry(std::shared_ptr<sql::database> db, std::unique_ptr<sql::connection> c)
      : db_(std::move(db)), c_(std::move(c)) {}
  tl::expected<void, registry_error> load();
  using topic_map = std::map<std::string, std::shared_ptr<topic_info>>;
  // Every topic as stored, and the change counter read before them.
  tl::expected<std::pair<topic_map, int64_t>, registry_error> read_all_locked() REQUIRES(db_mu_);
  // In a change's transaction: counts the change; returns the counter's new value.
  tl::expected<int64_t, registry_error> count_change_locked() REQUIRES(db_mu_);
  // After a change committed at counter value `v`: nothing else changed in between if it
  // follows the last value seen.
  void seen_locked(int64_t v) REQUIRES(db_mu_) {
    if (v == seen_ + 1) seen_ = v;
    last_change_.store(v, std::memory_order_release);
  }
  tl::expected<uint64_t, registry_error> next_counter_locked(const char* name, int64_t count)
      REQUIRES(db_mu_);
  void index_locked(topic_ptr t) REQUIRES(mu_);

  // db_mu_ serialises the database and every change (held across SQLite, which may wait on
  // an fsync); mu_ guards the maps only, so lookups never wait on the database. Order: db_mu_
  // before mu_.
  mutable base::mutex db_mu_;
  mutable base::mutex mu_;
  std::shared_ptr<sql::database> db_;
  std::unique_ptr<sql::connection> c_ GUARDED_BY(db_mu_);
  std::map<std::string, topic_ptr, std::less<>> by_name_ GUARDED_BY(mu_);
  std::map<topic_id, topic_ptr> by_id_ GUARDED_BY(mu_);
  std::atomic<uint64_t> version_{0};     // moved under mu_, read without it
  int64_t seen_ GUARDED_BY(db_mu_) = 0;  // the change counter the maps reflect
  std::atomic<int64_t> last_change_{0};  // moved under db_mu_ (seen_locked), read without it
};

// Kafka's rules for topic names: 1-249 characters of [a-zA-Z0-9._-], not "." or "..".
// Returns an empty string when valid, else why not.
[[nodiscard]] std::string check_topic_name(std::string_view name);

}  // namespace silt::metadata
