#include "metadata/sql.h"

#include <atomic>
#include <charconv>
#include <cstdio>

#include "base/log.h"
#include "base/redact.h"
#include "metadata/sql_drivers.h"

namespace silt::metadata::sql {

namespace {

thread_local bool network_thread = false;
std::atomic<uint64_t> violations{0};
std::atomic<uint64_t> commits{0};
std::atomic<uint64_t> statements{0};

// The schema, one step per version. `{int}` and `{blob}` become each database's 64-bit
// integer and byte-string types. Version 1 is the schema of the first releases, which had
// no version table: its statements create only what is missing.
struct migration {
  int64_t version;
  const char* sql;
};

constexpr migration migrations[] = {
    {1, R"sql(
CREATE TABLE IF NOT EXISTS streams(
  stream_id {int} PRIMARY KEY,
  start_offset {int} NOT NULL,
  end_offset {int} NOT NULL);
CREATE TABLE IF NOT EXISTS objects(
  object_id {int} PRIMARY KEY,
  key TEXT NOT NULL UNIQUE,
  size {int} NOT NULL,
  kind {int} NOT NULL,
  created_ms {int} NOT NULL,
  deleting_ms {int});
CREATE TABLE IF NOT EXISTS ranges(
  stream_id {int} NOT NULL,
  start_offset {int} NOT NULL,
  end_offset {int} NOT NULL,
  object_id {int} NOT NULL REFERENCES objects(object_id),
  max_timestamp {int} NOT NULL,
  size {int} NOT NULL,
  PRIMARY KEY(stream_id, start_offset));
CREATE INDEX IF NOT EXISTS ranges_by_object ON ranges(object_id);
CREATE TABLE IF NOT EXISTS counters(name TEXT PRIMARY KEY, value {int} NOT NULL);
INSERT INTO counters VALUES('object_id', 0) ON CONFLICT DO NOTHING;
CREATE TABLE IF NOT EXISTS topics(
  name TEXT PRIMARY KEY,
  id {blob} NOT NULL,
  created_ms {int} NOT NULL);
CREATE TABLE IF NOT EXISTS topic_partitions(
  name TEXT NOT NULL,
  partition {int} NOT NULL,
  stream_id {int} NOT NULL,
  PRIMARY KEY(name, partition));
CREATE TABLE IF NOT EXISTS topic_configs(
  name TEXT NOT NULL,
  key TEXT NOT NULL,
  value TEXT NOT NULL,
  PRIMARY KEY(name, key));
CREATE TABLE IF NOT EXISTS registry_counters(name TEXT PRIMARY KEY, value {int} NOT NULL);
INSERT INTO registry_counters VALUES('stream_id', 1) ON CONFLICT DO NOTHING;
INSERT INTO registry_counters VALUES('producer_id', 0) ON CONFLICT DO NOTHING;
CREATE TABLE IF NOT EXISTS registry_blobs(key TEXT PRIMARY KEY, value {blob} NOT NULL);
)sql"},
    // Ownership: each stream's owner (node id) and epoch, the offset each epoch began at (for
    // OffsetForLeaderEpoch), and producer state kept per stream so that its writes are fenced
    // with the stream's epoch.
    {2, R"sql(
ALTER TABLE streams ADD COLUMN owner {int} NOT NULL DEFAULT -1;
ALTER TABLE streams ADD COLUMN epoch {int} NOT NULL DEFAULT 0;
CREATE TABLE stream_epochs(
  stream_id {int} NOT NULL,
  epoch {int} NOT NULL,
  start_offset {int} NOT NULL,
  PRIMARY KEY(stream_id, epoch));
CREATE TABLE producer_states(stream_id {int} PRIMARY KEY, data {blob} NOT NULL);
INSERT INTO producer_states(stream_id, data)
  SELECT CAST(substr(key, 11) AS {int}), value FROM registry_blobs WHERE key LIKE 'producers/%';
DELETE FROM registry_blobs WHERE key LIKE 'producers/%';
)sql"},
    // Consumer groups (group_store.h): each coordinator shard's owner and epoch, fenced like a
    // stream's; committed offsets and each group's durable state, kept under the group's shard
    // so that a node loads the shards it takes.
    {3, R"sql(
CREATE TABLE coordinator_shards(
  shard {int} PRIMARY KEY,
  owner {int} NOT NULL,
  epoch {int} NOT NULL);
CREATE TABLE group_offsets(
  group_id TEXT NOT NULL,
  topic TEXT NOT NULL,
  partition {int} NOT NULL,
  shard {int} NOT NULL,
  committed_offset {int} NOT NULL,
  leader_epoch {int} NOT NULL,
  metadata TEXT NOT NULL,
  commit_ms {int} NOT NULL,
  expire_ms {int} NOT NULL,
  PRIMARY KEY(group_id, topic, partition));
CREATE INDEX group_offsets_by_shard ON group_offsets(shard);
CREATE INDEX group_offsets_by_topic ON group_offsets(topic);
CREATE TABLE consumer_groups(
  group_id TEXT PRIMARY KEY,
  shard {int} NOT NULL,
  data {blob} NOT NULL);
CREATE INDEX consumer_groups_by_shard ON consumer_groups(shard);
)sql"},
    // Cluster membership (broker_registry.h): each broker's registration, its broker epoch
    // (from a counter, unique across the cluster) and its lease in the database's clock; a
    // counter of topic changes and one of stream ownership changes, which brokers poll to see
    // each other's.
    {4, R"sql(
CREATE TABLE brokers(
  node_id {int} PRIMARY KEY,
  broker_epoch {int} NOT NULL,
  host TEXT NOT NULL,
  port {int} NOT NULL,
  rack TEXT NOT NULL,
  wal_location TEXT NOT NULL,
  machine TEXT NOT NULL,
  lease_expires_ms {int} NOT NULL,
  registered_ms {int} NOT NULL);
INSERT INTO registry_counters VALUES('broker_epoch', 0) ON CONFLICT DO NOTHING;
INSERT INTO registry_counters VALUES('topics_changed', 0) ON CONFLICT DO NOTHING;
INSERT INTO counters VALUES('ownership_changed', 0) ON CONFLICT DO NOTHING;
)sql"},
    // Placement (cluster/controller.h): each stream's target owner (-1: none) and the value of
    // the ownership counter at its last change of owner, epoch or target, so that brokers read
    // only what changed; the controller's lease.
    {5, R"sql(
ALTER TABLE streams ADD COLUMN target {int} NOT NULL DEFAULT -1;
ALTER TABLE streams ADD COLUMN owner_version {int} NOT NULL DEFAULT 0;
CREATE INDEX streams_by_owner_version ON streams(owner_version);
CREATE TABLE controller(
  id {int} PRIMARY KEY,
  node_id {int} NOT NULL,
  epoch {int} NOT NULL,
  lease_expires_ms {int} NOT NULL);
INSERT INTO controller VALUES(0, -1, 0, 0) ON CONFLICT DO NOTHING;
)sql"},
    // Failover (cluster/controller.h): the WALs of dead brokers that live brokers are taking
    // over, each with the broker doing it; each stream taken from a dead broker until the
    // takeover finished; brokers stopping cleanly (placement gives them nothing).
    {6, R"sql(
ALTER TABLE streams ADD COLUMN taken_from {int} NOT NULL DEFAULT -1;
ALTER TABLE brokers ADD COLUMN draining {int} NOT NULL DEFAULT 0;
CREATE TABLE wal_takeovers(
  node_id {int} PRIMARY KEY,
  holder {int} NOT NULL,
  wal_location TEXT NOT NULL,
  created_ms {int} NOT NULL);
)sql"},
    // Placement by load (cluster/controller.h): the bytes per second each broker measured for
    // its busiest streams.
    {7, R"sql(
ALTER TABLE brokers ADD COLUMN stream_loads TEXT NOT NULL DEFAULT '';
)sql"},
    // Placement of coordinator shards (cluster/controller.h): each shard's target owner (-1:
    // none), set by the controller; the target takes the shard at its next epoch.
    {8, R"sql(
ALTER TABLE coordinator_shards ADD COLUMN target {int} NOT NULL DEFAULT -1;
)sql"},
    // Agreement on topics (broker_registry.h): the value of the topic change counter each
    // broker has taken in (-1: none yet), which an admin call waits for on every live broker.
    {9, R"sql(
ALTER TABLE brokers ADD COLUMN topics_applied {int} NOT NULL DEFAULT -1;
)sql"},
    // Security (credential_store.h): each user's SCRAM credential per mechanism, and a counter
    // of changes to what the brokers authenticate and authorize with, which they poll.
    {10, R"sql(
CREATE TABLE scram_credentials(
  user_name TEXT NOT NULL,
  mechanism TEXT NOT NULL,
  salt {blob} NOT NULL,
  stored_key {blob} NOT NULL,
  server_key {blob} NOT NULL,
  iterations {int} NOT NULL,
  PRIMARY KEY(user_name, mechanism));
INSERT INTO registry_counters VALUES('security_changed', 0) ON CONFLICT DO NOTHING;
)sql"},
    // ACLs (acl_store.h), keyed by a digest of their fields (names may be longer than an
    // index row takes), and the counter of their changes, which brokers poll.
    {11, R"sql(
CREATE TABLE acls(
  key TEXT PRIMARY KEY,
  resource_type {int} NOT NULL,
  resource_name TEXT NOT NULL,
  pattern_type {int} NOT NULL,
  principal TEXT NOT NULL,
  host TEXT NOT NULL,
  operation {int} NOT NULL,
  permission_type {int} NOT NULL);
INSERT INTO registry_counters VALUES('acls_changed', 0) ON CONFLICT DO NOTHING;
)sql"},
    // Every advertised listener of each broker (broker_registry.h), so that a client is told
    // of the other brokers on the listener it came through.
    {12, R"sql(
ALTER TABLE brokers ADD COLUMN listeners TEXT NOT NULL DEFAULT '';
)sql"},
    // Client quotas (quota_store.h), one row per entity and key, the entity keyed by a digest
    // of its parts (names may be longer than an index row takes), and the counter of their
    // changes, which brokers poll.
    {13, R"sql(
CREATE TABLE client_quotas(
  entity_key TEXT NOT NULL,
  user_kind {int} NOT NULL,
  user_name TEXT NOT NULL,
  client_kind {int} NOT NULL,
  client_name TEXT NOT NULL,
  quota_key TEXT NOT NULL,
  value TEXT NOT NULL,
  PRIMARY KEY(entity_key, quota_key));
INSERT INTO registry_counters VALUES('quotas_changed', 0) ON CONFLICT DO NOTHING;
)sql"},
};

std::string expand(std::string_view sql, dialect d) {
  std::string out;
  out.reserve(sql.size());
  for (size_t i = 0; i < sql.size();) {
    if (sql.substr(i, 5) == "{int}") {
      out += d == dialect::sqlite ? "INTEGER" : "BIGINT";
      i += 5;
    } else if (sql.substr(i, 6) == "{blob}") {
      out += d == dialect::sqlite ? "BLOB" : "BYTEA";
      i += 6;
    } else {
      out += sql[i++];
    }
  }
  return out;
}

tl::expected<void, std::string> migrate(connection& c) {
  transaction tx(c);
  if (!tx.ok()) return tl::make_unexpected(std::string("cannot begin the schema migration"));
  if (c.kind() == dialect::postgresql) {
    // Brokers opening one database at once migrate one at a time.
    if (auto r = c.query("SELECT pg_advisory_xact_lock(5173696)"); !r) {
      return tl::make_unexpected(r.error());
    }
  }
  if (auto r = c.script("CREATE TABLE IF NOT EXISTS schema_version(version " +
                        expand("{int}", c.kind()) + " NOT NULL)");
      !r) {
    return tl::make_unexpected(r.error());
  }
  auto current = stored_schema_version(c);
  if (!current) return tl::make_unexpected(current.error());
  if (*current > schema_version) {
    return tl::make_unexpected("the metadata schema is at version " + std::to_string(*current) +
                               ", newer than this broker's " + std::to_string(schema_version));
  }
  for (const auto& m : migrations) {
    if (m.version <= *current) continue;
    if (auto r = c.script(expand(m.sql, c.kind())); !r) {
      return tl::make_unexpected("migrating the metadata schema to version " +
                                 std::to_string(m.version) + ": " + r.error());
    }
  }
  if (*current < schema_version) {
    if (auto r = c.query("DELETE FROM schema_version"); !r) return tl::make_unexpected(r.error());
    if (auto r = c.query("INSERT INTO schema_version(version) VALUES(?)", schema_version); !r) {
      return tl::make_unexpected(r.error());
    }
  }
  if (!tx.commit()) return tl::make_unexpected(std::string("cannot commit the schema migration"));
  return {};
}

}  // namespace

int64_t row::integer(size_t col) const {
  const value& v = values_.at(col);
  if (v.kind == value::type::integer) return v.integer;
  int64_t out = 0;
  std::from_chars(v.text.data(), v.text.data() + v.text.size(), out);
  return out;
}

std::vector<uint8_t> row::blob(size_t col) const {
  const std::string& s = values_.at(col).text;
  return {s.begin(), s.end()};
}

transaction::~transaction() {
  if (ok_ && !done_) (void)c_.script("ROLLBACK");
  c_.in_transaction = false;
}

bool transaction::commit() {
  done_ = true;
  const bool ok = ok_ && c_.script("COMMIT").has_value();
  c_.in_transaction = false;
  if (ok) commits.fetch_add(1, std::memory_order_relaxed);
  return ok;
}

uint64_t committed_transactions() {
  return commits.load(std::memory_order_relaxed);
}

uint64_t statements_sent() {
  return statements.load(std::memory_order_relaxed);
}

void count_statement(const connection& c, std::string_view sql) {
  if (c.in_transaction) return;
  for (const std::string_view verb : {"INSERT", "UPDATE", "DELETE"}) {
    if (sql.starts_with(verb)) {
      commits.fetch_add(1, std::memory_order_relaxed);
      return;
    }
  }
}

std::string_view now_ms_expression(dialect d) {
  return d == dialect::sqlite ? "CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER)"
                              : "CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS BIGINT)";
}

tl::expected<int64_t, std::string> stored_schema_version(connection& c) {
  auto r = c.query("SELECT version FROM schema_version");
  if (!r) return tl::make_unexpected(r.error());
  return r->rows.empty() ? 0 : r->rows.front().integer(0);
}

namespace {

// open_database, but for the masking of the error.
tl::expected<std::shared_ptr<database>, std::string> open_unmasked(const std::string& uri) {
  tl::expected<std::shared_ptr<database>, std::string> db;
  if (uri.starts_with("sqlite://")) {
    db = open_sqlite(uri.substr(9));
  } else if (uri.starts_with("postgresql://") || uri.starts_with("postgres://")) {
    db = open_postgresql(uri);
  } else if (uri.find("://") == std::string::npos) {
    db = open_sqlite(uri);  // a bare path, or ":memory:"
  } else {
    return tl::make_unexpected("unsupported metadata store URI " + base::redact_uri(uri) +
                               " (sqlite:///path or postgresql://user:password@host:port/db)");
  }
  if (!db) return db;
  auto c = (*db)->connect();
  if (!c) return tl::make_unexpected(c.error());
  if (auto r = migrate(**c); !r) {
    return tl::make_unexpected("metadata store " + (*db)->describe() + ": " + r.error());
  }
  return db;
}

}  // namespace

tl::expected<std::shared_ptr<database>, std::string> open_database(const std::string& uri) {
  auto db = open_unmasked(uri);
  // The drivers mask what they quote of the URI; this catches anything else that does.
  if (!db) return tl::make_unexpected(base::redact_secrets(db.error(), uri));
  return db;
}

void mark_network_thread(bool network) {
  network_thread = network;
}

uint64_t network_thread_violations() {
  return violations.load(std::memory_order_relaxed);
}

bool refuse_on_network_thread(std::string_view sql) {
  if (!network_thread) {
    statements.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  violations.fetch_add(1, std::memory_order_relaxed);
  SILT_LOG(warn, "metadata: refused a statement on a network thread: %.*s",
           static_cast<int>(std::min<size_t>(sql.size(), 120)), sql.data());
  return true;
}

}  // namespace silt::metadata::sql
