#include "metadata/topic_registry.h"

#include <cstdio>
#include <random>

#include "base/clock.h"

namespace silt::metadata {

namespace {

using sql::row;
using sql::transaction;

tl::unexpected<registry_error> fail(registry_error e) {
  return tl::make_unexpected(e);
}

topic_id random_id() {
  static thread_local std::mt19937_64 rng(std::random_device{}());
  topic_id id{};
  do {
    for (size_t i = 0; i < id.size(); i += 8) {
      const uint64_t v = rng();
      for (size_t j = 0; j < 8; ++j) id[i + j] = static_cast<uint8_t>(v >> (8 * j));
    }
  } while (id == topic_id{});
  return id;
}

// Kafka's cluster ids are a random UUID in URL-safe base64 without padding (22 characters).
std::string random_cluster_id() {
  static constexpr char alphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  const topic_id id = random_id();
  std::string out;
  uint32_t acc = 0;
  int bits = 0;
  for (uint8_t b : id) {
    acc = (acc << 8) | b;
    bits += 8;
    while (bits >= 6) {
      bits -= 6;
      out += alphabet[(acc >> bits) & 63];
    }
  }
  if (bits > 0) out += alphabet[(acc << (6 - bits)) & 63];
  return out;
}

bool write_configs(sql::connection& c, const std::string& name,
                   const std::map<std::string, std::string>& configs) {
  if (!c.query("DELETE FROM topic_configs WHERE name=?", std::string_view(name))) return false;
  for (const auto& [k, v] : configs) {
    if (!c.query("INSERT INTO topic_configs(name, key, value) VALUES(?,?,?)",
                 std::string_view(name), std::string_view(k), std::string_view(v))) {
      return false;
    }
  }
  return true;
}

bool write_partitions(sql::connection& c, const std::string& name,
                      const std::vector<base::stream_id>& streams, size_t from) {
  for (size_t i = from; i < streams.size(); ++i) {
    if (!c.query("INSERT INTO topic_partitions(name, partition, stream_id) VALUES(?,?,?)",
                 std::string_view(name), static_cast<int64_t>(i),
                 static_cast<int64_t>(streams[i].value()))) {
      return false;
    }
  }
  return true;
}

}  // namespace

std::string check_topic_name(std::string_view name) {
  if (name.empty()) return "the topic name is empty";
  if (name == "." || name == "..") return "the topic name cannot be '.' or '..'";
  if (name.size() > 249) {
    return "the topic name is " + std::to_string(name.size()) +
           " characters long, the maximum is 249";
  }
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '_' || c == '-';
    if (!ok) {
      return "the topic name '" + std::string(name) +
             "' contains characters other than ASCII alphanumerics, '.', '_' and '-'";
    }
  }
  return {};
}

tl::expected<std::unique_ptr<topic_registry>, std::string> topic_registry::open(
    std::shared_ptr<sql::database> db) {
  auto c = db->connect();
  if (!c) return tl::make_unexpected(c.error());
  std::unique_ptr<topic_registry> r(new topic_registry(std::move(db), std::move(*c)));
  if (!r->load())
    return tl::make_unexpected("cannot load the topic registry from " + r->db_->describe());
  return r;
}

tl::expected<std::unique_ptr<topic_registry>, std::string> topic_registry::open(
    const std::string& uri) {
  auto db = sql::open_database(uri);
  if (!db) return tl::make_unexpected(db.error());
  return open(std::move(*db));
}

topic_registry::~topic_registry() = default;

tl::expected<void, registry_error> topic_registry::load() {
  base::lock_guard db_lock(db_mu_);
  auto all = read_all_locked();
  if (!all) return fail(all.error());
  seen_ = all->second;
  base::lock_guard lock(mu_);
  for (auto& [name, t] : all->first) index_locked(t);
  return {};
}

tl::expected<int64_t, registry_error> topic_registry::count_change_locked() {
  auto r = c_->query(
      "UPDATE registry_counters SET value = value + 1 WHERE name = 'topics_changed' "
      "RETURNING value");
  if (!r || r->rows.empty()) return fail(registry_error::io);
  return r->rows.front().integer(0);
}

tl::expected<std::pair<topic_registry::topic_map, int64_t>, registry_error>
topic_registry::read_all_locked() {
  auto counter = c_->query("SELECT value FROM registry_counters WHERE name = 'topics_changed'");
  if (!counter || counter->rows.empty()) return fail(registry_error::io);
  const int64_t at = counter->rows.front().integer(0);
  topic_map topics;
  auto ts = c_->query("SELECT name, id, created_ms FROM topics");
  auto ps = c_->query("SELECT name, partition, stream_id FROM topic_partitions");
  auto cs = c_->query("SELECT name, key, value FROM topic_configs");
  if (!ts || !ps || !cs) return fail(registry_error::io);
  for (const row& s : ts->rows) {
    auto t = std::make_shared<topic_info>();
    t->name = s.text(0);
    const auto id = s.blob(1);
    if (id.size() == t->id.size()) std::copy(id.begin(), id.end(), t->id.begin());
    t->created_ms = s.integer(2);
    topics[t->name] = t;
  }
  for (const row& s : ps->rows) {
    auto it = topics.find(s.text(0));
    if (it == topics.end()) continue;
    const auto p = static_cast<size_t>(s.integer(1));
    if (it->second->streams.size() <= p) it->second->streams.resize(p + 1);
    it->second->streams[p] = base::stream_id(static_cast<uint64_t>(s.integer(2)));
  }
  for (const row& s : cs->rows) {
    auto it = topics.find(s.text(0));
    if (it != topics.end()) it->second->configs[s.text(1)] = s.text(2);
  }
  return std::pair(std::move(topics), at);
}

tl::expected<topic_changes, registry_error> topic_registry::refresh() {
  base::lock_guard db_lock(db_mu_);
  auto counter = c_->query("SELECT value FROM registry_counters WHERE name = 'topics_changed'");
  if (!counter || counter->rows.empty()) return fail(registry_error::io);
  topic_changes out;
  out.version = seen_;
  if (counter->rows.front().integer(0) == seen_) return out;
  auto all = read_all_locked();
  if (!all) return fail(all.error());
  auto& stored = all->first;
  base::lock_guard lock(mu_);
  std::vector<topic_ptr> gone;
  for (const auto& [name, t] : by_name_) {
    auto it = stored.find(name);
    if (it == stored.end() || it->second->id != t->id) gone.push_back(t);
  }
  for (const auto& t : gone) {
    by_id_.erase(t->id);
    by_name_.erase(t->name);
    out.removed.push_back(t);
  }
  for (auto& [name, t] : stored) {
    auto it = by_name_.find(name);
    if (it != by_name_.end() && it->second->streams == t->streams &&
        it->second->configs == t->configs) {
      continue;
    }
    out.changed.push_back(t);
    index_locked(t);
  }
  if (!gone.empty()) version_.fetch_add(1, std::memory_order_release);
  seen_ = all->second;
  out.version = seen_;
  return out;
}

void topic_registry::index_locked(topic_ptr t) {
  by_id_[t->id] = t;
  by_name_[t->name] = std::move(t);
  version_.fetch_add(1, std::memory_order_release);
}

topic_ptr topic_registry::find(std::string_view name) const {
  base::lock_guard lock(mu_);
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : it->second;
}

topic_ptr topic_registry::find(const topic_id& id) const {
  base::lock_guard lock(mu_);
  auto it = by_id_.find(id);
  return it == by_id_.end() ? nullptr : it->second;
}

std::vector<topic_ptr> topic_registry::all() const {
  base::lock_guard lock(mu_);
  std::vector<topic_ptr> out;
  out.reserve(by_name_.size());
  for (const auto& [name, t] : by_name_) out.push_back(t);
  return out;
}

tl::expected<uint64_t, registry_error> topic_registry::next_counter_locked(const char* name,
                                                                           int64_t count) {
  auto r =
      c_->query("UPDATE registry_counters SET value = value + ? WHERE name = ? RETURNING value",
                count, std::string_view(name));
  if (!r || r->rows.empty()) return fail(registry_error::io);
  return static_cast<uint64_t>(r->rows.front().integer(0) - count);
}

tl::expected<topic_ptr, registry_error> topic_registry::create(
    const std::string& name, int32_t partitions,
    const std::map<std::string, std::string>& configs) {
  if (partitions <= 0) return fail(registry_error::invalid);
  // Writers take db_mu_ for the whole change, so the maps they read stay as they saw them;
  // readers take only mu_, never waiting on the database.
  base::lock_guard db_lock(db_mu_);
  auto t = std::make_shared<topic_info>();
  t->name = name;
  {
    base::lock_guard lock(mu_);
    if (by_name_.count(name) != 0) return fail(registry_error::exists);
    do {
      t->id = random_id();
    } while (by_id_.count(t->id) != 0);
  }
  t->configs = configs;
  t->created_ms = base::now_ms();
  transaction tx(*c_);
  if (!tx.ok()) return fail(registry_error::io);
  auto first = next_counter_locked("stream_id", partitions);
  if (!first) return fail(first.error());
  for (int32_t p = 0; p < partitions; ++p)
    t->streams.emplace_back(*first + static_cast<uint64_t>(p));
  // Created meanwhile by another broker (not yet refreshed here).
  auto there = c_->query("SELECT 1 FROM topics WHERE name = ?", std::string_view(name));
  if (!there) return fail(registry_error::io);
  if (!there->rows.empty()) return fail(registry_error::exists);
  auto changes = count_change_locked();
  if (!changes) return fail(changes.error());
  if (!c_->query("INSERT INTO topics(name, id, created_ms) VALUES(?,?,?)", std::string_view(name),
                 sql::bytes_view{t->id}, t->created_ms) ||
      !write_partitions(*c_, name, t->streams, 0) || !write_configs(*c_, name, configs) ||
      !tx.commit()) {
    return fail(registry_error::io);
  }
  seen_locked(*changes);
  base::lock_guard lock(mu_);
  index_locked(t);
  return t;
}

tl::expected<topic_ptr, registry_error> topic_registry::add_partitions(const std::string& name,
                                                                       int32_t total) {
  base::lock_guard db_lock(db_mu_);
  const auto old = find(name);
  if (!old) return fail(registry_error::not_found);
  if (total <= old->partitions()) return fail(registry_error::invalid);
  auto t = std::make_shared<topic_info>(*old);
  transaction tx(*c_);
  if (!tx.ok()) return fail(registry_error::io);
  const int32_t added = total - old->partitions();
  auto first = next_counter_locked("stream_id", added);
  if (!first) return fail(first.error());
  auto changes = count_change_locked();
  if (!changes) return fail(changes.error());
  for (int32_t i = 0; i < added; ++i) t->streams.emplace_back(*first + static_cast<uint64_t>(i));
  if (!write_partitions(*c_, name, t->streams, old->streams.size()) || !tx.commit()) {
    return fail(registry_error::io);
  }
  seen_locked(*changes);
  base::lock_guard lock(mu_);
  index_locked(t);
  return t;
}

tl::expected<topic_ptr, registry_error> topic_registry::remove(const std::string& name) {
  base::lock_guard db_lock(db_mu_);
  auto t = find(name);
  if (!t) return fail(registry_error::not_found);
  transaction tx(*c_);
  if (!tx.ok()) return fail(registry_error::io);
  auto changes = count_change_locked();
  if (!changes) return fail(changes.error());
  for (const char* sql :
       {"DELETE FROM topics WHERE name=?", "DELETE FROM topic_partitions WHERE name=?",
        "DELETE FROM topic_configs WHERE name=?"}) {
    if (!c_->query(sql, std::string_view(name))) return fail(registry_error::io);
  }
  if (!tx.commit()) return fail(registry_error::io);
  seen_locked(*changes);
  base::lock_guard lock(mu_);
  by_id_.erase(t->id);
  by_name_.erase(name);
  version_.fetch_add(1, std::memory_order_release);
  return t;
}

tl::expected<topic_ptr, registry_error> topic_registry::set_configs(
    const std::string& name, const std::map<std::string, std::string>& configs) {
  base::lock_guard db_lock(db_mu_);
  const auto old = find(name);
  if (!old) return fail(registry_error::not_found);
  auto t = std::make_shared<topic_info>(*old);
  t->configs = configs;
  transaction tx(*c_);
  if (!tx.ok()) return fail(registry_error::io);
  auto changes = count_change_locked();
  if (!changes) return fail(changes.error());
  if (!write_configs(*c_, name, configs) || !tx.commit()) return fail(registry_error::io);
  seen_locked(*changes);
  base::lock_guard lock(mu_);
  index_locked(t);
  return t;
}

tl::expected<std::string, registry_error> topic_registry::cluster_id(const std::string& preferred) {
  base::lock_guard db_lock(db_mu_);
  // Brokers starting at once on one database agree: the first insert wins.
  const std::string id = preferred.empty() ? random_cluster_id() : preferred;
  if (!c_->query(
          "INSERT INTO registry_blobs(key, value) VALUES('cluster_id', ?) "
          "ON CONFLICT DO NOTHING",
          sql::bytes_view{std::span(reinterpret_cast<const uint8_t*>(id.data()), id.size())})) {
    return fail(registry_error::io);
  }
  auto r = c_->query("SELECT value FROM registry_blobs WHERE key = 'cluster_id'");
  if (!r || r->rows.empty()) return fail(registry_error::io);
  const auto stored = r->rows.front().blob(0);
  return std::string(stored.begin(), stored.end());
}

tl::expected<int64_t, registry_error> topic_registry::allocate_producer_ids(int64_t count) {
  base::lock_guard db_lock(db_mu_);
  transaction tx(*c_);
  if (!tx.ok()) return fail(registry_error::io);
  auto first = next_counter_locked("producer_id", count);
  if (!first || !tx.commit()) return fail(registry_error::io);
  return static_cast<int64_t>(*first);
}

}  // namespace silt::metadata
