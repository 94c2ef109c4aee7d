#include "metadata/topic_registry.h"

#include <random>

#include <sqlite3.h>

#include "base/clock.h"
#include "metadata/sqlite.h"

namespace silt::metadata {

namespace {

using sqlite::statement;
using sqlite::transaction;

tl::unexpected<registry_error> fail(registry_error e) {
  return tl::make_unexpected(e);
}

constexpr const char* schema = R"sql(
CREATE TABLE IF NOT EXISTS topics(
  name TEXT PRIMARY KEY,
  id BLOB NOT NULL,
  created_ms INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS topic_partitions(
  name TEXT NOT NULL,
  partition INTEGER NOT NULL,
  stream_id INTEGER NOT NULL,
  PRIMARY KEY(name, partition));
CREATE TABLE IF NOT EXISTS topic_configs(
  name TEXT NOT NULL,
  key TEXT NOT NULL,
  value TEXT NOT NULL,
  PRIMARY KEY(name, key));
CREATE TABLE IF NOT EXISTS registry_counters(name TEXT PRIMARY KEY, value INTEGER NOT NULL);
INSERT OR IGNORE INTO registry_counters VALUES('stream_id', 1);
INSERT OR IGNORE INTO registry_counters VALUES('producer_id', 0);
CREATE TABLE IF NOT EXISTS registry_blobs(key TEXT PRIMARY KEY, value BLOB NOT NULL);
)sql";

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

bool exec(sqlite3* db, const char* sql) {
  char* err = nullptr;
  if (sqlite3_exec(db, sql, nullptr, nullptr, &err) != SQLITE_OK) {
    std::fprintf(stderr, "topic registry: %s\n", err ? err : "error");
    sqlite3_free(err);
    return false;
  }
  return true;
}

bool write_configs(sqlite3* db, const std::string& name,
                   const std::map<std::string, std::string>& configs) {
  statement del(db, "DELETE FROM topic_configs WHERE name=?");
  del.bind(1, name);
  if (del.step() != SQLITE_DONE) return false;
  for (const auto& [k, v] : configs) {
    statement ins(db, "INSERT INTO topic_configs(name, key, value) VALUES(?,?,?)");
    ins.bind(1, name).bind(2, k).bind(3, v);
    if (ins.step() != SQLITE_DONE) return false;
  }
  return true;
}

bool write_partitions(sqlite3* db, const std::string& name, const std::vector<uint64_t>& streams,
                      size_t from) {
  for (size_t i = from; i < streams.size(); ++i) {
    statement ins(db, "INSERT INTO topic_partitions(name, partition, stream_id) VALUES(?,?,?)");
    ins.bind(1, name).bind(2, static_cast<int64_t>(i)).bind(3, static_cast<int64_t>(streams[i]));
    if (ins.step() != SQLITE_DONE) return false;
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
    const std::string& path) {
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr) !=
      SQLITE_OK) {
    std::string msg = "cannot open the topic registry " + path + ": " + sqlite3_errmsg(db);
    sqlite3_close(db);
    return tl::make_unexpected(msg);
  }
  std::unique_ptr<topic_registry> r(new topic_registry(db));
  sqlite3_busy_timeout(db, 10000);
  for (const char* sql : {"PRAGMA journal_mode=WAL", "PRAGMA synchronous=FULL", schema}) {
    if (!exec(db, sql)) {
      return tl::make_unexpected("cannot set up the topic registry in " + path + ": " +
                                 sqlite3_errmsg(db));
    }
  }
  if (!r->load()) return tl::make_unexpected("cannot load the topic registry from " + path);
  return r;
}

topic_registry::~topic_registry() {
  sqlite3_close(db_);
}

tl::expected<void, registry_error> topic_registry::load() {
  std::lock_guard db_lock(db_mu_);
  std::map<std::string, std::shared_ptr<topic_info>> topics;
  {
    statement s(db_, "SELECT name, id, created_ms FROM topics");
    int rc;
    while ((rc = s.step()) == SQLITE_ROW) {
      auto t = std::make_shared<topic_info>();
      t->name = s.text(0);
      const auto id = s.blob(1);
      if (id.size() == t->id.size()) std::copy(id.begin(), id.end(), t->id.begin());
      t->created_ms = s.integer(2);
      topics[t->name] = t;
    }
    if (rc != SQLITE_DONE) return fail(registry_error::io);
  }
  {
    statement s(db_,
                "SELECT name, partition, stream_id FROM topic_partitions ORDER BY name, partition");
    int rc;
    while ((rc = s.step()) == SQLITE_ROW) {
      auto it = topics.find(s.text(0));
      if (it == topics.end()) continue;
      const auto p = static_cast<size_t>(s.integer(1));
      if (it->second->streams.size() <= p) it->second->streams.resize(p + 1);
      it->second->streams[p] = static_cast<uint64_t>(s.integer(2));
    }
    if (rc != SQLITE_DONE) return fail(registry_error::io);
  }
  {
    statement s(db_, "SELECT name, key, value FROM topic_configs");
    int rc;
    while ((rc = s.step()) == SQLITE_ROW) {
      auto it = topics.find(s.text(0));
      if (it != topics.end()) it->second->configs[s.text(1)] = s.text(2);
    }
    if (rc != SQLITE_DONE) return fail(registry_error::io);
  }
  std::lock_guard lock(mu_);
  for (auto& [name, t] : topics) index_locked(t);
  return {};
}

void topic_registry::index_locked(topic_ptr t) {
  by_id_[t->id] = t;
  by_name_[t->name] = std::move(t);
}

topic_ptr topic_registry::find(std::string_view name) const {
  std::lock_guard lock(mu_);
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : it->second;
}

topic_ptr topic_registry::find(const topic_id& id) const {
  std::lock_guard lock(mu_);
  auto it = by_id_.find(id);
  return it == by_id_.end() ? nullptr : it->second;
}

std::vector<topic_ptr> topic_registry::all() const {
  std::lock_guard lock(mu_);
  std::vector<topic_ptr> out;
  out.reserve(by_name_.size());
  for (const auto& [name, t] : by_name_) out.push_back(t);
  return out;
}

tl::expected<uint64_t, registry_error> topic_registry::next_counter_locked(const char* name,
                                                                           int64_t count) {
  statement get(db_, "SELECT value FROM registry_counters WHERE name=?");
  get.bind(1, std::string(name));
  if (get.step() != SQLITE_ROW) return fail(registry_error::io);
  const int64_t first = get.integer(0);
  statement put(db_, "UPDATE registry_counters SET value=? WHERE name=?");
  put.bind(1, first + count).bind(2, std::string(name));
  if (put.step() != SQLITE_DONE) return fail(registry_error::io);
  return static_cast<uint64_t>(first);
}

tl::expected<topic_ptr, registry_error> topic_registry::create(
    const std::string& name, int32_t partitions,
    const std::map<std::string, std::string>& configs) {
  if (partitions <= 0) return fail(registry_error::invalid);
  // Writers take db_mu_ for the whole change, so the maps they read stay as they saw them;
  // readers take only mu_, never waiting on the database.
  std::lock_guard db_lock(db_mu_);
  auto t = std::make_shared<topic_info>();
  t->name = name;
  {
    std::lock_guard lock(mu_);
    if (by_name_.count(name) != 0) return fail(registry_error::exists);
    do {
      t->id = random_id();
    } while (by_id_.count(t->id) != 0);
  }
  t->configs = configs;
  t->created_ms = base::now_ms();
  transaction tx(db_);
  if (!tx.ok()) return fail(registry_error::io);
  auto first = next_counter_locked("stream_id", partitions);
  if (!first) return fail(first.error());
  for (int32_t p = 0; p < partitions; ++p) t->streams.push_back(*first + static_cast<uint64_t>(p));
  statement ins(db_, "INSERT INTO topics(name, id, created_ms) VALUES(?,?,?)");
  ins.bind(1, name).bind_blob(2, t->id.data(), t->id.size()).bind(3, t->created_ms);
  if (ins.step() != SQLITE_DONE || !write_partitions(db_, name, t->streams, 0) ||
      !write_configs(db_, name, configs) || !tx.commit()) {
    return fail(registry_error::io);
  }
  std::lock_guard lock(mu_);
  index_locked(t);
  return t;
}

tl::expected<topic_ptr, registry_error> topic_registry::add_partitions(const std::string& name,
                                                                       int32_t total) {
  std::lock_guard db_lock(db_mu_);
  const auto old = find(name);
  if (!old) return fail(registry_error::not_found);
  if (total <= old->partitions()) return fail(registry_error::invalid);
  auto t = std::make_shared<topic_info>(*old);
  transaction tx(db_);
  if (!tx.ok()) return fail(registry_error::io);
  const int32_t added = total - old->partitions();
  auto first = next_counter_locked("stream_id", added);
  if (!first) return fail(first.error());
  for (int32_t i = 0; i < added; ++i) t->streams.push_back(*first + static_cast<uint64_t>(i));
  if (!write_partitions(db_, name, t->streams, old->streams.size()) || !tx.commit()) {
    return fail(registry_error::io);
  }
  std::lock_guard lock(mu_);
  index_locked(t);
  return t;
}

tl::expected<topic_ptr, registry_error> topic_registry::remove(const std::string& name) {
  std::lock_guard db_lock(db_mu_);
  auto t = find(name);
  if (!t) return fail(registry_error::not_found);
  transaction tx(db_);
  if (!tx.ok()) return fail(registry_error::io);
  for (const char* sql :
       {"DELETE FROM topics WHERE name=?", "DELETE FROM topic_partitions WHERE name=?",
        "DELETE FROM topic_configs WHERE name=?"}) {
    statement s(db_, sql);
    s.bind(1, name);
    if (s.step() != SQLITE_DONE) return fail(registry_error::io);
  }
  if (!tx.commit()) return fail(registry_error::io);
  std::lock_guard lock(mu_);
  by_id_.erase(t->id);
  by_name_.erase(name);
  return t;
}

tl::expected<topic_ptr, registry_error> topic_registry::set_configs(
    const std::string& name, const std::map<std::string, std::string>& configs) {
  std::lock_guard db_lock(db_mu_);
  const auto old = find(name);
  if (!old) return fail(registry_error::not_found);
  auto t = std::make_shared<topic_info>(*old);
  t->configs = configs;
  transaction tx(db_);
  if (!tx.ok() || !write_configs(db_, name, configs) || !tx.commit()) {
    return fail(registry_error::io);
  }
  std::lock_guard lock(mu_);
  index_locked(t);
  return t;
}

tl::expected<std::string, registry_error> topic_registry::cluster_id(const std::string& preferred) {
  auto stored = get_blob("cluster_id");
  if (!stored) return fail(stored.error());
  if (!stored->empty()) return std::string(stored->begin(), stored->end());
  const std::string id = preferred.empty() ? random_cluster_id() : preferred;
  auto put = put_blob("cluster_id", std::vector<uint8_t>(id.begin(), id.end()));
  if (!put) return fail(put.error());
  return id;
}

tl::expected<int64_t, registry_error> topic_registry::allocate_producer_ids(int64_t count) {
  std::lock_guard db_lock(db_mu_);
  transaction tx(db_);
  if (!tx.ok()) return fail(registry_error::io);
  auto first = next_counter_locked("producer_id", count);
  if (!first || !tx.commit()) return fail(registry_error::io);
  return static_cast<int64_t>(*first);
}

tl::expected<void, registry_error> topic_registry::put_blob(const std::string& key,
                                                            const std::vector<uint8_t>& value) {
  std::lock_guard db_lock(db_mu_);
  statement s(db_, "INSERT OR REPLACE INTO registry_blobs(key, value) VALUES(?,?)");
  s.bind(1, key).bind_blob(2, value.data(), value.size());
  if (s.step() != SQLITE_DONE) return fail(registry_error::io);
  return {};
}

tl::expected<std::vector<uint8_t>, registry_error> topic_registry::get_blob(
    const std::string& key) {
  std::lock_guard db_lock(db_mu_);
  statement s(db_, "SELECT value FROM registry_blobs WHERE key=?");
  s.bind(1, key);
  const int rc = s.step();
  if (rc == SQLITE_DONE) return std::vector<uint8_t>();
  if (rc != SQLITE_ROW) return fail(registry_error::io);
  return s.blob(0);
}

tl::expected<void, registry_error> topic_registry::erase_blob(const std::string& key) {
  std::lock_guard db_lock(db_mu_);
  statement s(db_, "DELETE FROM registry_blobs WHERE key=?");
  s.bind(1, key);
  if (s.step() != SQLITE_DONE) return fail(registry_error::io);
  return {};
}

}  // namespace silt::metadata
