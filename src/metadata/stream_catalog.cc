#include "metadata/stream_catalog.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <utility>

#include <sqlite3.h>

#include "base/clock.h"
#include "metadata/sqlite.h"

namespace silt::metadata {

namespace {

tl::unexpected<catalog_error> fail(catalog_error e) {
  return tl::make_unexpected(e);
}

using base::now_ms;

using sqlite::statement;
using sqlite::transaction;

constexpr const char* schema = R"sql(
CREATE TABLE IF NOT EXISTS streams(
  stream_id INTEGER PRIMARY KEY,
  start_offset INTEGER NOT NULL,
  end_offset INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS objects(
  object_id INTEGER PRIMARY KEY,
  key TEXT NOT NULL UNIQUE,
  size INTEGER NOT NULL,
  kind INTEGER NOT NULL,
  created_ms INTEGER NOT NULL,
  deleting_ms INTEGER);
CREATE TABLE IF NOT EXISTS ranges(
  stream_id INTEGER NOT NULL,
  start_offset INTEGER NOT NULL,
  end_offset INTEGER NOT NULL,
  object_id INTEGER NOT NULL REFERENCES objects(object_id),
  max_timestamp INTEGER NOT NULL,
  size INTEGER NOT NULL,
  PRIMARY KEY(stream_id, start_offset));
CREATE INDEX IF NOT EXISTS ranges_by_object ON ranges(object_id);
CREATE TABLE IF NOT EXISTS counters(name TEXT PRIMARY KEY, value INTEGER NOT NULL);
INSERT OR IGNORE INTO counters VALUES('object_id', 0);
)sql";

bool insert_object(sqlite3* db, const object_record& o) {
  statement s(db, "INSERT INTO objects(object_id, key, size, kind, created_ms) VALUES(?,?,?,?,?)");
  s.bind(1, static_cast<int64_t>(o.object_id))
      .bind(2, o.key)
      .bind(3, static_cast<int64_t>(o.size))
      .bind(4, static_cast<int64_t>(o.kind))
      .bind(5, o.created_ms != 0 ? o.created_ms : now_ms());
  return s.step() == SQLITE_DONE;
}

bool insert_range(sqlite3* db, uint64_t object_id, const stream_range& r) {
  statement s(db,
              "INSERT INTO ranges(stream_id, start_offset, end_offset, object_id, "
              "max_timestamp, size) VALUES(?,?,?,?,?,?)");
  s.bind(1, static_cast<int64_t>(r.stream_id))
      .bind(2, r.start_offset)
      .bind(3, r.end_offset)
      .bind(4, static_cast<int64_t>(object_id))
      .bind(5, r.max_timestamp)
      .bind(6, static_cast<int64_t>(r.size));
  return s.step() == SQLITE_DONE;
}

located_range located(const statement& s) {
  located_range l;
  l.range.stream_id = static_cast<uint64_t>(s.integer(0));
  l.range.start_offset = s.integer(1);
  l.range.end_offset = s.integer(2);
  l.range.max_timestamp = s.integer(3);
  l.range.size = static_cast<uint64_t>(s.integer(4));
  l.object_id = static_cast<uint64_t>(s.integer(5));
  l.key = s.text(6);
  return l;
}

object_record object_row(const statement& s) {
  object_record o;
  o.object_id = static_cast<uint64_t>(s.integer(0));
  o.key = s.text(1);
  o.size = static_cast<uint64_t>(s.integer(2));
  o.kind = static_cast<object_kind>(s.integer(3));
  o.created_ms = s.integer(4);
  return o;
}

}  // namespace

std::string_view catalog_error_name(catalog_error e) {
  switch (e) {
    case catalog_error::discontinuous:
      return "discontinuous range";
    case catalog_error::unknown_object:
      return "unknown object";
    case catalog_error::io:
      return "catalog I/O error";
  }
  return "unknown";
}

tl::expected<std::unique_ptr<stream_catalog>, std::string> stream_catalog::open(
    const std::string& path) {
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr) !=
      SQLITE_OK) {
    std::string msg = "cannot open catalog " + path + ": " + sqlite3_errmsg(db);
    sqlite3_close(db);
    return tl::make_unexpected(msg);
  }
  std::unique_ptr<stream_catalog> c(new stream_catalog(db));
  sqlite3_busy_timeout(db, 10000);
  for (const char* pragma :
       {"PRAGMA journal_mode=WAL", "PRAGMA synchronous=FULL", "PRAGMA foreign_keys=ON"}) {
    if (!c->exec(pragma)) return tl::make_unexpected(std::string("catalog: ") + pragma);
  }
  if (!c->exec(schema)) {
    return tl::make_unexpected("cannot create the catalog schema in " + path + ": " +
                               sqlite3_errmsg(db));
  }
  return c;
}

stream_catalog::~stream_catalog() {
  sqlite3_close(db_);
}

tl::expected<void, catalog_error> stream_catalog::exec(const char* sql) {
  char* err = nullptr;
  if (sqlite3_exec(db_, sql, nullptr, nullptr, &err) != SQLITE_OK) {
    std::fprintf(stderr, "catalog: %s\n", err ? err : "error");
    sqlite3_free(err);
    return fail(catalog_error::io);
  }
  return {};
}

tl::expected<uint64_t, catalog_error> stream_catalog::next_object_id() {
  std::lock_guard lock(mu_);
  statement s(db_,
              "UPDATE counters SET value = value + 1 WHERE name = 'object_id' RETURNING value");
  if (s.step() != SQLITE_ROW) return fail(catalog_error::io);
  return static_cast<uint64_t>(s.integer(0));
}

tl::expected<void, catalog_error> stream_catalog::commit_object(
    const object_record& object, const std::vector<stream_range>& ranges) {
  std::lock_guard lock(mu_);
  transaction tx(db_);
  if (!tx.ok()) return fail(catalog_error::io);
  if (!insert_object(db_, object)) return fail(catalog_error::io);
  for (const auto& r : ranges) {
    if (r.end_offset <= r.start_offset) return fail(catalog_error::discontinuous);
    statement get(db_, "SELECT end_offset FROM streams WHERE stream_id = ?");
    get.bind(1, static_cast<int64_t>(r.stream_id));
    const int rc = get.step();
    if (rc == SQLITE_ROW) {
      if (get.integer(0) != r.start_offset) return fail(catalog_error::discontinuous);
      statement up(db_, "UPDATE streams SET end_offset = ? WHERE stream_id = ?");
      up.bind(1, r.end_offset).bind(2, static_cast<int64_t>(r.stream_id));
      if (up.step() != SQLITE_DONE) return fail(catalog_error::io);
    } else if (rc == SQLITE_DONE) {
      // A stream's first object may start above 0 only if the stream was created there; the
      // store creates streams at 0, so anything else is a gap.
      if (r.start_offset != 0) return fail(catalog_error::discontinuous);
      statement ins(db_, "INSERT INTO streams(stream_id, start_offset, end_offset) VALUES(?,0,?)");
      ins.bind(1, static_cast<int64_t>(r.stream_id)).bind(2, r.end_offset);
      if (ins.step() != SQLITE_DONE) return fail(catalog_error::io);
    } else {
      return fail(catalog_error::io);
    }
    if (!insert_range(db_, object.object_id, r)) return fail(catalog_error::io);
  }
  if (!tx.commit()) return fail(catalog_error::io);
  return {};
}

tl::expected<void, catalog_error> stream_catalog::replace(const object_record& object,
                                                          const std::vector<stream_range>& ranges,
                                                          const std::vector<uint64_t>& replaced) {
  std::lock_guard lock(mu_);
  transaction tx(db_);
  if (!tx.ok()) return fail(catalog_error::io);
  // The replaced ranges of each stream that the new object covers, merged.
  std::map<uint64_t, std::vector<stream_range>> old_by_stream;
  for (uint64_t id : replaced) {
    statement s(db_,
                "SELECT stream_id, start_offset, end_offset FROM ranges WHERE object_id = ? "
                "ORDER BY stream_id, start_offset");
    s.bind(1, static_cast<int64_t>(id));
    int rc;
    while ((rc = s.step()) == SQLITE_ROW) {
      old_by_stream[static_cast<uint64_t>(s.integer(0))].push_back(
          {static_cast<uint64_t>(s.integer(0)), s.integer(1), s.integer(2), -1, 0});
    }
    if (rc != SQLITE_DONE) return fail(catalog_error::io);
  }
  std::map<uint64_t, std::vector<stream_range>> new_by_stream;
  for (const auto& r : ranges) new_by_stream[r.stream_id].push_back(r);
  for (auto& [stream, news] : new_by_stream) {
    auto& olds = old_by_stream[stream];
    std::sort(olds.begin(), olds.end(),
              [](const auto& a, const auto& b) { return a.start_offset < b.start_offset; });
    // The new ranges must be the replaced ones merged where they touch: no offset gained,
    // lost or moved.
    std::vector<std::pair<int64_t, int64_t>> runs;
    for (const auto& o : olds) {
      if (!runs.empty() && runs.back().second == o.start_offset) {
        runs.back().second = o.end_offset;
      } else {
        runs.emplace_back(o.start_offset, o.end_offset);
      }
    }
    if (runs.size() != news.size()) return fail(catalog_error::discontinuous);
    for (size_t i = 0; i < runs.size(); ++i) {
      if (news[i].start_offset != runs[i].first || news[i].end_offset != runs[i].second) {
        return fail(catalog_error::discontinuous);
      }
    }
    for (const auto& o : olds) {
      statement del(db_, "DELETE FROM ranges WHERE stream_id = ? AND start_offset = ?");
      del.bind(1, static_cast<int64_t>(stream)).bind(2, o.start_offset);
      if (del.step() != SQLITE_DONE) return fail(catalog_error::io);
    }
  }
  if (!insert_object(db_, object)) return fail(catalog_error::io);
  for (const auto& r : ranges) {
    if (!insert_range(db_, object.object_id, r)) return fail(catalog_error::io);
  }
  if (!mark_orphans_deleting()) return fail(catalog_error::io);
  if (!tx.commit()) return fail(catalog_error::io);
  return {};
}

tl::expected<void, catalog_error> stream_catalog::mark_orphans_deleting() {
  statement s(db_,
              "UPDATE objects SET deleting_ms = ? WHERE deleting_ms IS NULL AND NOT EXISTS "
              "(SELECT 1 FROM ranges WHERE ranges.object_id = objects.object_id)");
  s.bind(1, now_ms());
  if (s.step() != SQLITE_DONE) return fail(catalog_error::io);
  return {};
}

tl::expected<std::vector<located_range>, catalog_error> stream_catalog::find(uint64_t stream_id,
                                                                             int64_t offset,
                                                                             size_t limit) {
  std::lock_guard lock(mu_);
  statement s(db_,
              "SELECT r.stream_id, r.start_offset, r.end_offset, r.max_timestamp, r.size, "
              "r.object_id, o.key FROM ranges r JOIN objects o ON o.object_id = r.object_id "
              "WHERE r.stream_id = ? AND r.end_offset > ? ORDER BY r.start_offset LIMIT ?");
  s.bind(1, static_cast<int64_t>(stream_id)).bind(2, offset).bind(3, static_cast<int64_t>(limit));
  std::vector<located_range> out;
  int rc;
  while ((rc = s.step()) == SQLITE_ROW) out.push_back(located(s));
  if (rc != SQLITE_DONE) return fail(catalog_error::io);
  return out;
}

tl::expected<std::vector<located_range>, catalog_error> stream_catalog::ranges(uint64_t stream_id) {
  return find(stream_id, INT64_MIN, SIZE_MAX >> 1);
}

tl::expected<std::vector<stream_range>, catalog_error> stream_catalog::object_ranges(
    uint64_t object_id) {
  std::lock_guard lock(mu_);
  statement s(db_,
              "SELECT stream_id, start_offset, end_offset, max_timestamp, size FROM ranges "
              "WHERE object_id = ? ORDER BY stream_id, start_offset");
  s.bind(1, static_cast<int64_t>(object_id));
  std::vector<stream_range> out;
  int rc;
  while ((rc = s.step()) == SQLITE_ROW) {
    out.push_back({static_cast<uint64_t>(s.integer(0)), s.integer(1), s.integer(2), s.integer(3),
                   static_cast<uint64_t>(s.integer(4))});
  }
  if (rc != SQLITE_DONE) return fail(catalog_error::io);
  return out;
}

tl::expected<std::optional<stream_state>, catalog_error> stream_catalog::stream(
    uint64_t stream_id) {
  std::lock_guard lock(mu_);
  statement s(db_, "SELECT start_offset, end_offset FROM streams WHERE stream_id = ?");
  s.bind(1, static_cast<int64_t>(stream_id));
  const int rc = s.step();
  if (rc == SQLITE_DONE) return std::optional<stream_state>();
  if (rc != SQLITE_ROW) return fail(catalog_error::io);
  return std::optional<stream_state>(stream_state{s.integer(0), s.integer(1)});
}

tl::expected<std::vector<uint64_t>, catalog_error> stream_catalog::streams() {
  std::lock_guard lock(mu_);
  statement s(db_, "SELECT stream_id FROM streams ORDER BY stream_id");
  std::vector<uint64_t> out;
  int rc;
  while ((rc = s.step()) == SQLITE_ROW) out.push_back(static_cast<uint64_t>(s.integer(0)));
  if (rc != SQLITE_DONE) return fail(catalog_error::io);
  return out;
}

tl::expected<std::vector<std::pair<uint64_t, stream_state>>, catalog_error>
stream_catalog::stream_states() {
  std::lock_guard lock(mu_);
  statement s(db_, "SELECT stream_id, start_offset, end_offset FROM streams ORDER BY stream_id");
  std::vector<std::pair<uint64_t, stream_state>> out;
  int rc;
  while ((rc = s.step()) == SQLITE_ROW) {
    out.emplace_back(static_cast<uint64_t>(s.integer(0)), stream_state{s.integer(1), s.integer(2)});
  }
  if (rc != SQLITE_DONE) return fail(catalog_error::io);
  return out;
}

tl::expected<void, catalog_error> stream_catalog::trim(uint64_t stream_id, int64_t offset) {
  std::lock_guard lock(mu_);
  transaction tx(db_);
  if (!tx.ok()) return fail(catalog_error::io);
  statement up(db_, "UPDATE streams SET start_offset = max(start_offset, ?) WHERE stream_id = ?");
  up.bind(1, offset).bind(2, static_cast<int64_t>(stream_id));
  if (up.step() != SQLITE_DONE) return fail(catalog_error::io);
  if (sqlite3_changes(db_) == 0) {
    statement ins(db_, "INSERT INTO streams(stream_id, start_offset, end_offset) VALUES(?, ?, 0)");
    ins.bind(1, static_cast<int64_t>(stream_id)).bind(2, offset);
    if (ins.step() != SQLITE_DONE) return fail(catalog_error::io);
  }
  statement del(db_, "DELETE FROM ranges WHERE stream_id = ? AND end_offset <= ?");
  del.bind(1, static_cast<int64_t>(stream_id)).bind(2, offset);
  if (del.step() != SQLITE_DONE) return fail(catalog_error::io);
  if (!mark_orphans_deleting()) return fail(catalog_error::io);
  if (!tx.commit()) return fail(catalog_error::io);
  return {};
}

tl::expected<std::vector<object_record>, catalog_error> stream_catalog::objects(object_kind kind) {
  std::lock_guard lock(mu_);
  statement s(db_,
              "SELECT object_id, key, size, kind, created_ms FROM objects WHERE kind = ? AND "
              "deleting_ms IS NULL ORDER BY object_id");
  s.bind(1, static_cast<int64_t>(kind));
  std::vector<object_record> out;
  int rc;
  while ((rc = s.step()) == SQLITE_ROW) out.push_back(object_row(s));
  if (rc != SQLITE_DONE) return fail(catalog_error::io);
  return out;
}

tl::expected<std::vector<object_record>, catalog_error> stream_catalog::deletable(
    int64_t before_ms) {
  std::lock_guard lock(mu_);
  statement s(db_,
              "SELECT object_id, key, size, kind, created_ms FROM objects WHERE deleting_ms IS "
              "NOT NULL AND deleting_ms <= ? AND NOT EXISTS (SELECT 1 FROM ranges WHERE "
              "ranges.object_id = objects.object_id) ORDER BY object_id");
  s.bind(1, before_ms);
  std::vector<object_record> out;
  int rc;
  while ((rc = s.step()) == SQLITE_ROW) out.push_back(object_row(s));
  if (rc != SQLITE_DONE) return fail(catalog_error::io);
  return out;
}

tl::expected<void, catalog_error> stream_catalog::forget(uint64_t object_id) {
  std::lock_guard lock(mu_);
  statement s(db_, "DELETE FROM objects WHERE object_id = ? AND deleting_ms IS NOT NULL");
  s.bind(1, static_cast<int64_t>(object_id));
  if (s.step() != SQLITE_DONE) return fail(catalog_error::io);
  if (sqlite3_changes(db_) == 0) return fail(catalog_error::unknown_object);
  return {};
}

tl::expected<uint64_t, catalog_error> stream_catalog::last_object_id() {
  std::lock_guard lock(mu_);
  statement s(db_, "SELECT value FROM counters WHERE name = 'object_id'");
  if (s.step() != SQLITE_ROW) return fail(catalog_error::io);
  return static_cast<uint64_t>(s.integer(0));
}

tl::expected<std::vector<std::string>, catalog_error> stream_catalog::object_keys() {
  std::lock_guard lock(mu_);
  statement s(db_, "SELECT key FROM objects ORDER BY key");
  std::vector<std::string> out;
  int rc;
  while ((rc = s.step()) == SQLITE_ROW) out.push_back(s.text(0));
  if (rc != SQLITE_DONE) return fail(catalog_error::io);
  return out;
}

}  // namespace silt::metadata
