#include "metadata/stream_catalog.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <span>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "base/clock.h"
#include "metadata/broker_registry.h"

namespace silt::metadata {

namespace {

tl::unexpected<catalog_error> fail(catalog_error e) {
  return tl::make_unexpected(e);
}

using base::now_ms;
using sql::row;

int64_t i64(uint64_t v) {
  return static_cast<int64_t>(v);
}

int64_t i64(base::stream_id v) {
  return static_cast<int64_t>(v.value());
}

int64_t i64(base::node_id v) {
  return v.value();
}

int64_t i64(base::leader_epoch v) {
  return v.value();
}

int64_t i64(base::offset v) {
  return v.value();
}

base::offset offset_at(const row& s, size_t col) {
  return base::offset(s.integer(col));
}

base::node_id node_at(const row& s, size_t col) {
  return base::node_id(static_cast<int32_t>(s.integer(col)));
}

base::leader_epoch epoch_at(const row& s, size_t col) {
  return base::leader_epoch(static_cast<int32_t>(s.integer(col)));
}

// Streams per statement of take() and rows per statement of commit_object().
constexpr size_t take_chunk = 256;
constexpr size_t commit_chunk = 128;

// How many of `left` rows the next multi-row statement carries: the largest power of two up
// to `most`, so that a handful of statement texts (each prepared once per connection) cover
// any count.
size_t chunk_size(size_t left, size_t most) {
  size_t n = most;
  while (n > left) n /= 2;
  return n;
}

// One range of commit_object() on its own: moves its stream's end if the stream is at the
// range's start and at its owner and epoch, creates a stream never taken that starts at 0,
// and otherwise says why not.
tl::expected<void, catalog_error> commit_range(sql::connection& c, const stream_range& r) {
  auto up = c.query(
      "UPDATE streams SET end_offset = ? WHERE stream_id = ? AND end_offset = ? AND owner = ? "
      "AND epoch = ?",
      i64(r.end_offset), i64(r.stream_id), i64(r.start_offset), i64(r.owner), i64(r.epoch));
  if (!up) return fail(catalog_error::io);
  if (up->changes > 0) return {};
  auto get =
      c.query("SELECT end_offset, owner, epoch FROM streams WHERE stream_id = ?", i64(r.stream_id));
  if (!get) return fail(catalog_error::io);
  if (!get->rows.empty()) {
    const row& s = get->rows.front();
    if (node_at(s, 1) != r.owner || epoch_at(s, 2) != r.epoch) return fail(catalog_error::fenced);
    return fail(catalog_error::discontinuous);
  }
  // A stream's first object may start above 0 only if the stream was created there; the
  // store creates streams at 0, so anything else is a gap. Only a stream never taken can
  // appear here without a row.
  if (r.owner != base::node_id(-1) || r.epoch != base::leader_epoch()) {
    return fail(catalog_error::fenced);
  }
  if (r.start_offset != base::offset(0)) return fail(catalog_error::discontinuous);
  if (!c.query("INSERT INTO streams(stream_id, start_offset, end_offset) VALUES(?,0,?)",
               i64(r.stream_id), i64(r.end_offset))) {
    return fail(catalog_error::io);
  }
  return {};
}

// `row` repeated n times, comma-separated: the VALUES list of a multi-row INSERT.
std::string values_list(size_t n, std::string_view row) {
  std::string out;
  out.reserve(n * (row.size() + 1));
  for (size_t i = 0; i < n; ++i) {
    if (i > 0) out += ',';
    out += row;
  }
  return out;
}

base::stream_id stream_id_at(const row& s, size_t col) {
  return base::stream_id(static_cast<uint64_t>(s.integer(col)));
}

bool insert_object(sql::connection& c, const object_record& o) {
  return c
      .query("INSERT INTO objects(object_id, key, size, kind, created_ms) VALUES(?,?,?,?,?)",
             i64(o.object_id), std::string_view(o.key), i64(o.size), static_cast<int64_t>(o.kind),
             o.created_ms != 0 ? o.created_ms : now_ms())
      .has_value();
}

bool insert_range(sql::connection& c, uint64_t object_id, const stream_range& r) {
  return c
      .query(
          "INSERT INTO ranges(stream_id, start_offset, end_offset, object_id, max_timestamp, "
          "size) VALUES(?,?,?,?,?,?)",
          i64(r.stream_id), i64(r.start_offset), i64(r.end_offset), i64(object_id), r.max_timestamp,
          i64(r.size))
      .has_value();
}

located_range located(const row& s) {
  located_range l;
  l.range.stream_id = stream_id_at(s, 0);
  l.range.start_offset = offset_at(s, 1);
  l.range.end_offset = offset_at(s, 2);
  l.range.max_timestamp = s.integer(3);
  l.range.size = static_cast<uint64_t>(s.integer(4));
  l.object_id = static_cast<uint64_t>(s.integer(5));
  l.key = s.text(6);
  return l;
}

object_record object_row(const row& s) {
  object_record o;
  o.object_id = static_cast<uint64_t>(s.integer(0));
  o.key = s.text(1);
  o.size = static_cast<uint64_t>(s.integer(2));
  o.kind = static_cast<object_kind>(s.integer(3));
  o.created_ms = s.integer(4);
  return o;
}

// stream_id, start_offset, end_offset, max_timestamp, size.
stream_range range_row(const row& s) {
  return {stream_id_at(s, 0), offset_at(s, 1), offset_at(s, 2), s.integer(3),
          static_cast<uint64_t>(s.integer(4))};
}

// start_offset, end_offset, owner, epoch, target, taken_from.
stream_state state_row(const row& s, size_t first) {
  return {offset_at(s, first),    offset_at(s, first + 1), node_at(s, first + 2),
          epoch_at(s, first + 3), node_at(s, first + 4),   node_at(s, first + 5)};
}

}  // namespace

std::string_view catalog_error_name(catalog_error e) {
  switch (e) {
    case catalog_error::discontinuous:
      return "discontinuous range";
    case catalog_error::unknown_object:
      return "unknown object";
    case catalog_error::fenced:
      return "fenced: the stream has a newer owner or epoch";
    case catalog_error::lapsed:
      return "the owner's broker lease has lapsed";
    case catalog_error::unavailable:
      return "the target broker is not live or is stopping";
    case catalog_error::io:
      return "catalog I/O error";
  }
  return "unknown";
}

tl::expected<std::unique_ptr<stream_catalog>, std::string> stream_catalog::open(
    std::shared_ptr<sql::database> db) {
  auto c = db->connect();
  if (!c) return tl::make_unexpected(c.error());
  return std::unique_ptr<stream_catalog>(new stream_catalog(std::move(db), std::move(*c)));
}

tl::expected<std::unique_ptr<stream_catalog>, std::string> stream_catalog::open(
    const std::string& uri) {
  auto db = sql::open_database(uri);
  if (!db) return tl::make_unexpected(db.error());
  return open(std::move(*db));
}

stream_catalog::~stream_catalog() = default;

tl::expected<uint64_t, catalog_error> stream_catalog::next_object_id() {
  base::lock_guard lock(mu_);
  auto r =
      c_->query("UPDATE counters SET value = value + 1 WHERE name = 'object_id' RETURNING value");
  if (!r || r->rows.empty()) return fail(catalog_error::io);
  return static_cast<uint64_t>(r->rows.front().integer(0));
}

tl::expected<void, catalog_error> stream_catalog::check_owner_locked(base::stream_id stream_id,
                                                                     base::node_id owner,
                                                                     base::leader_epoch epoch) {
  auto r = c_->query("SELECT owner, epoch FROM streams WHERE stream_id = ?", i64(stream_id));
  if (!r) return fail(catalog_error::io);
  const bool matches = r->rows.empty() ? owner == base::node_id(-1) && epoch == base::leader_epoch()
                                       : node_at(r->rows.front(), 0) == owner &&
                                             epoch_at(r->rows.front(), 1) == epoch;
  if (!matches) return fail(catalog_error::fenced);
  return {};
}

tl::expected<void, catalog_error> stream_catalog::check_lease_locked(base::node_id owner) {
  if (owner == base::node_id(-1)) return {};
  auto lapsed = lease_lapsed(*c_, owner);
  if (!lapsed) return fail(catalog_error::io);
  if (*lapsed) return fail(catalog_error::lapsed);
  return {};
}

tl::expected<void, catalog_error> stream_catalog::commit_object(
    const object_record& object, const std::vector<stream_range>& ranges) {
  for (const auto& r : ranges) {
    if (r.end_offset <= r.start_offset) return fail(catalog_error::discontinuous);
  }
  // One statement moves the ends of a chunk of streams at once when no stream has two ranges
  // here (an upload's object has one per stream); otherwise each range in order.
  std::unordered_set<base::stream_id> streams;
  streams.reserve(ranges.size());
  bool distinct = true;
  for (const auto& r : ranges) distinct = streams.insert(r.stream_id).second && distinct;
  base::lock_guard lock(mu_);
  sql::transaction tx(*c_);
  if (!tx.ok()) return fail(catalog_error::io);
  base::node_id checked(-1);
  for (const auto& r : ranges) {
    if (r.owner == checked) continue;
    if (auto f = check_lease_locked(r.owner); !f) return f;
    checked = r.owner;
  }
  if (!insert_object(*c_, object)) return fail(catalog_error::io);
  std::vector<sql::param> params;
  std::unordered_set<base::stream_id> moved;
  for (size_t at = 0; at < ranges.size();) {
    const size_t n = chunk_size(ranges.size() - at, commit_chunk);
    const std::span<const stream_range> chunk(ranges.data() + at, n);
    at += n;
    moved.clear();
    if (distinct) {
      // Checks continuity and ownership of each range's stream and locks its row.
      params.clear();
      for (const auto& r : chunk) {
        params.insert(params.end(), {i64(r.stream_id), i64(r.start_offset), i64(r.end_offset),
                                     i64(r.owner), i64(r.epoch)});
      }
      auto up = c_->run(
          "UPDATE streams SET end_offset = v.column3 FROM (VALUES " +
              values_list(n,
                          "(CAST(? AS BIGINT), CAST(? AS BIGINT), CAST(? AS BIGINT), "
                          "CAST(? AS BIGINT), CAST(? AS BIGINT))") +
              ") AS v WHERE streams.stream_id = v.column1 AND streams.end_offset = v.column2 "
              "AND streams.owner = v.column4 AND streams.epoch = v.column5 "
              "RETURNING streams.stream_id",
          params);
      if (!up) return fail(catalog_error::io);
      for (const row& r : up->rows) moved.insert(stream_id_at(r, 0));
    }
    for (const auto& r : chunk) {
      if (moved.contains(r.stream_id)) continue;
      if (auto f = commit_range(*c_, r); !f) return f;
    }
    params.clear();
    for (const auto& r : chunk) {
      params.insert(params.end(), {i64(r.stream_id), i64(r.start_offset), i64(r.end_offset),
                                   i64(object.object_id), r.max_timestamp, i64(r.size)});
    }
    if (!c_->run("INSERT INTO ranges(stream_id, start_offset, end_offset, object_id, "
                 "max_timestamp, size) VALUES " +
                     values_list(n, "(?, ?, ?, ?, ?, ?)"),
                 params)) {
      return fail(catalog_error::io);
    }
  }
  if (!tx.commit()) return fail(catalog_error::io);
  return {};
}

tl::expected<void, catalog_error> stream_catalog::replace(const object_record& object,
                                                          const std::vector<stream_range>& ranges,
                                                          const std::vector<stream_range>& replaced,
                                                          base::node_id writer) {
  // The replaced ranges of each stream, merged where they touch, must be the new ranges: no
  // offset gained, lost or moved.
  std::map<base::stream_id, std::vector<stream_range>> old_by_stream;
  for (const auto& r : replaced) old_by_stream[r.stream_id].push_back(r);
  std::map<base::stream_id, std::vector<stream_range>> new_by_stream;
  for (const auto& r : ranges) new_by_stream[r.stream_id].push_back(r);
  if (old_by_stream.size() != new_by_stream.size()) return fail(catalog_error::discontinuous);
  for (auto& [stream, olds] : old_by_stream) {
    auto it = new_by_stream.find(stream);
    if (it == new_by_stream.end()) return fail(catalog_error::discontinuous);
    std::sort(olds.begin(), olds.end(),
              [](const auto& a, const auto& b) { return a.start_offset < b.start_offset; });
    std::vector<std::pair<base::offset, base::offset>> runs;
    for (const auto& o : olds) {
      if (!runs.empty() && runs.back().second == o.start_offset) {
        runs.back().second = o.end_offset;
      } else {
        runs.emplace_back(o.start_offset, o.end_offset);
      }
    }
    const auto& news = it->second;
    if (runs.size() != news.size()) return fail(catalog_error::discontinuous);
    for (size_t i = 0; i < runs.size(); ++i) {
      if (news[i].start_offset != runs[i].first || news[i].end_offset != runs[i].second) {
        return fail(catalog_error::discontinuous);
      }
    }
  }
  base::lock_guard lock(mu_);
  sql::transaction tx(*c_);
  if (!tx.ok()) return fail(catalog_error::io);
  if (auto f = check_lease_locked(writer); !f) return f;
  for (const auto& o : replaced) {
    // A range trimmed away meanwhile (DeleteRecords, another writer of the database) is not
    // replaced: the whole compaction is refused.
    auto del =
        c_->query("DELETE FROM ranges WHERE stream_id = ? AND start_offset = ? AND end_offset = ?",
                  i64(o.stream_id), i64(o.start_offset), i64(o.end_offset));
    if (!del) return fail(catalog_error::io);
    if (del->changes != 1) return fail(catalog_error::discontinuous);
  }
  if (!insert_object(*c_, object)) return fail(catalog_error::io);
  for (const auto& r : ranges) {
    if (!insert_range(*c_, object.object_id, r)) return fail(catalog_error::io);
  }
  if (!mark_orphans_deleting_locked()) return fail(catalog_error::io);
  if (!tx.commit()) return fail(catalog_error::io);
  return {};
}

tl::expected<void, catalog_error> stream_catalog::mark_orphans_deleting_locked() {
  auto r = c_->query(
      "UPDATE objects SET deleting_ms = ? WHERE deleting_ms IS NULL AND NOT EXISTS "
      "(SELECT 1 FROM ranges WHERE ranges.object_id = objects.object_id)",
      now_ms());
  if (!r) return fail(catalog_error::io);
  return {};
}

tl::expected<std::vector<located_range>, catalog_error> stream_catalog::find(
    base::stream_id stream_id, base::offset offset, size_t limit) {
  base::lock_guard lock(mu_);
  auto r = c_->query(
      "SELECT r.stream_id, r.start_offset, r.end_offset, r.max_timestamp, r.size, "
      "r.object_id, o.key FROM ranges r JOIN objects o ON o.object_id = r.object_id "
      "WHERE r.stream_id = ? AND r.end_offset > ? ORDER BY r.start_offset LIMIT ?",
      i64(stream_id), i64(offset), static_cast<int64_t>(std::min<size_t>(limit, INT64_MAX)));
  if (!r) return fail(catalog_error::io);
  std::vector<located_range> out;
  out.reserve(r->rows.size());
  for (const row& s : r->rows) out.push_back(located(s));
  return out;
}

tl::expected<std::vector<located_range>, catalog_error> stream_catalog::ranges(
    base::stream_id stream_id) {
  return find(stream_id, base::offset(INT64_MIN), SIZE_MAX >> 1);
}

tl::expected<std::vector<located_range>, catalog_error> stream_catalog::ranges_with_age(
    base::stream_id stream_id) {
  base::lock_guard lock(mu_);
  auto r = c_->query(
      "SELECT r.stream_id, r.start_offset, r.end_offset, r.max_timestamp, r.size, "
      "r.object_id, o.key, o.created_ms FROM ranges r JOIN objects o ON o.object_id = "
      "r.object_id WHERE r.stream_id = ? ORDER BY r.start_offset",
      i64(stream_id));
  if (!r) return fail(catalog_error::io);
  std::vector<located_range> out;
  out.reserve(r->rows.size());
  for (const row& s : r->rows) {
    out.push_back(located(s));
    out.back().range.written_ms = s.integer(7);
  }
  return out;
}

tl::expected<std::vector<stream_range>, catalog_error> stream_catalog::all_ranges() {
  base::lock_guard lock(mu_);
  auto r = c_->query(
      "SELECT r.stream_id, r.start_offset, r.end_offset, r.max_timestamp, r.size, o.created_ms "
      "FROM ranges r JOIN objects o ON o.object_id = r.object_id "
      "ORDER BY r.stream_id, r.start_offset");
  if (!r) return fail(catalog_error::io);
  std::vector<stream_range> out;
  out.reserve(r->rows.size());
  for (const row& s : r->rows) {
    out.push_back(range_row(s));
    out.back().written_ms = s.integer(5);
  }
  return out;
}

tl::expected<std::vector<stream_range>, catalog_error> stream_catalog::object_ranges(
    uint64_t object_id) {
  base::lock_guard lock(mu_);
  auto r = c_->query(
      "SELECT stream_id, start_offset, end_offset, max_timestamp, size FROM ranges "
      "WHERE object_id = ? ORDER BY stream_id, start_offset",
      i64(object_id));
  if (!r) return fail(catalog_error::io);
  std::vector<stream_range> out;
  out.reserve(r->rows.size());
  for (const row& s : r->rows) out.push_back(range_row(s));
  return out;
}

tl::expected<std::optional<stream_state>, catalog_error> stream_catalog::stream(
    base::stream_id stream_id) {
  base::lock_guard lock(mu_);
  auto r = c_->query(
      "SELECT start_offset, end_offset, owner, epoch, target, taken_from FROM streams WHERE "
      "stream_id = ?",
      i64(stream_id));
  if (!r) return fail(catalog_error::io);
  if (r->rows.empty()) return std::optional<stream_state>();
  return std::optional<stream_state>(state_row(r->rows.front(), 0));
}

tl::expected<std::vector<std::pair<base::stream_id, stream_state>>, catalog_error>
stream_catalog::stream_states() {
  base::lock_guard lock(mu_);
  auto r = c_->query(
      "SELECT stream_id, start_offset, end_offset, owner, epoch, target, taken_from FROM streams "
      "ORDER BY "
      "stream_id");
  if (!r) return fail(catalog_error::io);
  std::vector<std::pair<base::stream_id, stream_state>> out;
  out.reserve(r->rows.size());
  for (const row& s : r->rows) {
    out.emplace_back(static_cast<uint64_t>(s.integer(0)), state_row(s, 1));
  }
  return out;
}

tl::expected<void, catalog_error> stream_catalog::trim(base::stream_id stream_id,
                                                       base::offset offset, base::node_id owner,
                                                       base::leader_epoch epoch) {
  base::lock_guard lock(mu_);
  sql::transaction tx(*c_);
  if (!tx.ok()) return fail(catalog_error::io);
  if (auto f = check_owner_locked(stream_id, owner, epoch); !f) return f;
  if (auto f = check_lease_locked(owner); !f) return f;
  auto up = c_->query(
      "UPDATE streams SET start_offset = CASE WHEN start_offset > ? THEN start_offset ELSE ? END "
      "WHERE stream_id = ?",
      i64(offset), i64(offset), i64(stream_id));
  if (!up) return fail(catalog_error::io);
  if (up->changes == 0 &&
      !c_->query("INSERT INTO streams(stream_id, start_offset, end_offset) VALUES(?, ?, 0)",
                 i64(stream_id), i64(offset))) {
    return fail(catalog_error::io);
  }
  if (!c_->query("DELETE FROM ranges WHERE stream_id = ? AND end_offset <= ?", i64(stream_id),
                 i64(offset))) {
    return fail(catalog_error::io);
  }
  if (!mark_orphans_deleting_locked()) return fail(catalog_error::io);
  if (!tx.commit()) return fail(catalog_error::io);
  return {};
}

tl::expected<std::vector<base::leader_epoch>, catalog_error> stream_catalog::take(
    base::node_id node, const std::vector<stream_take>& streams) {
  // Each stream once (the first listing's start offset counts), in as few statements as the
  // chunk sizes allow: taking 10,000 streams at start is about 80 statements, not 20,000.
  std::vector<stream_take> unique;
  unique.reserve(streams.size());
  {
    std::unordered_set<base::stream_id> seen;
    for (const auto& t : streams) {
      if (seen.insert(t.stream_id).second) unique.push_back(t);
    }
  }
  base::lock_guard lock(mu_);
  sql::transaction tx(*c_);
  if (!tx.ok()) return fail(catalog_error::io);
  // Other brokers poll this counter to learn new owners and epochs (ownership_version()).
  auto version = bump_ownership_locked();
  if (!version) return fail(version.error());
  std::unordered_map<base::stream_id, base::leader_epoch> taken;
  taken.reserve(unique.size());
  std::vector<sql::param> params;
  for (size_t at = 0; at < unique.size();) {
    const size_t n = chunk_size(unique.size() - at, take_chunk);
    const std::span<const stream_take> chunk(unique.data() + at, n);
    at += n;
    // A stream the catalog has not seen is created at epoch 0; any other moves to its next.
    // A target of the taking node is reached.
    params.clear();
    for (const auto& t : chunk) {
      params.emplace_back(i64(t.stream_id));
      params.emplace_back(i64(node));
      params.emplace_back(*version);
    }
    auto up = c_->run(
        "INSERT INTO streams(stream_id, start_offset, end_offset, owner, epoch, owner_version) "
        "VALUES " +
            values_list(n, "(?, 0, 0, ?, 0, ?)") +
            " ON CONFLICT(stream_id) DO UPDATE SET owner = excluded.owner, "
            "epoch = streams.epoch + 1, owner_version = excluded.owner_version, "
            "target = CASE WHEN streams.target = excluded.owner THEN -1 ELSE streams.target END "
            "RETURNING stream_id, epoch",
        params);
    if (!up || up->rows.size() != n) return fail(catalog_error::io);
    params.clear();
    for (const row& r : up->rows) taken[stream_id_at(r, 0)] = epoch_at(r, 1);
    for (const auto& t : chunk) {
      const auto it = taken.find(t.stream_id);
      if (it == taken.end()) return fail(catalog_error::io);
      params.emplace_back(i64(t.stream_id));
      params.emplace_back(i64(it->second));
      params.emplace_back(i64(t.start_offset));
    }
    if (!c_->run("INSERT INTO stream_epochs(stream_id, epoch, start_offset) VALUES " +
                     values_list(n, "(?, ?, ?)") + " ON CONFLICT DO NOTHING",
                 params)) {
      return fail(catalog_error::io);
    }
  }
  if (!tx.commit()) return fail(catalog_error::io);
  std::vector<base::leader_epoch> out;
  out.reserve(streams.size());
  for (const auto& t : streams) out.push_back(taken.at(t.stream_id));
  return out;
}

tl::expected<int64_t, catalog_error> stream_catalog::ownership_version() {
  base::lock_guard lock(mu_);
  auto r = c_->query("SELECT value FROM counters WHERE name = 'ownership_changed'");
  if (!r || r->rows.empty()) return fail(catalog_error::io);
  return r->rows.front().integer(0);
}

tl::expected<int64_t, catalog_error> stream_catalog::bump_ownership_locked() {
  auto r = c_->query(
      "UPDATE counters SET value = value + 1 WHERE name = 'ownership_changed' RETURNING value");
  if (!r || r->rows.empty()) return fail(catalog_error::io);
  return r->rows.front().integer(0);
}

tl::expected<ownership_changes, catalog_error> stream_catalog::ownership_changes_since(
    int64_t since) {
  base::lock_guard lock(mu_);
  ownership_changes out;
  // Nothing changed (the common case): one statement, one round trip.
  auto quick = c_->query("SELECT value FROM counters WHERE name = 'ownership_changed'");
  if (!quick || quick->rows.empty()) return fail(catalog_error::io);
  out.version = quick->rows.front().integer(0);
  if (out.version == since) return out;
  // One snapshot: the counter and the rows changed up to it.
  sql::transaction tx(*c_);
  if (!tx.ok()) return fail(catalog_error::io);
  auto v = c_->query("SELECT value FROM counters WHERE name = 'ownership_changed'");
  if (!v || v->rows.empty()) return fail(catalog_error::io);
  out.version = v->rows.front().integer(0);
  auto r = c_->query(
      "SELECT stream_id, start_offset, end_offset, owner, epoch, target, taken_from FROM streams "
      "WHERE "
      "owner_version > ? ORDER BY stream_id",
      since);
  if (!r) return fail(catalog_error::io);
  out.streams.reserve(r->rows.size());
  for (const row& s : r->rows) {
    out.streams.emplace_back(static_cast<uint64_t>(s.integer(0)), state_row(s, 1));
  }
  if (!tx.commit()) return fail(catalog_error::io);
  return out;
}

tl::expected<void, catalog_error> stream_catalog::assign(const std::vector<stream_target>& targets,
                                                         std::optional<controller_lease> lease) {
  base::lock_guard lock(mu_);
  sql::transaction tx(*c_);
  if (!tx.ok()) return fail(catalog_error::io);
  if (lease) {
    auto holds = controller_holds(*c_, lease->node, lease->epoch);
    if (!holds) return fail(catalog_error::io);
    if (!*holds) return fail(catalog_error::fenced);
  }
  auto version = bump_ownership_locked();
  if (!version) return fail(version.error());
  for (const auto& t : targets) {
    auto up = c_->query(
        "INSERT INTO streams(stream_id, start_offset, end_offset, target, owner_version) "
        "VALUES(?, 0, 0, ?, ?) ON CONFLICT(stream_id) DO UPDATE SET target = excluded.target, "
        "owner_version = excluded.owner_version",
        i64(t.stream_id), i64(t.target), *version);
    if (!up) return fail(catalog_error::io);
  }
  if (!tx.commit()) return fail(catalog_error::io);
  return {};
}

tl::expected<base::leader_epoch, catalog_error> stream_catalog::handover(base::stream_id stream_id,
                                                                         base::node_id from,
                                                                         base::leader_epoch epoch,
                                                                         base::node_id to,
                                                                         base::offset end) {
  base::lock_guard lock(mu_);
  sql::transaction tx(*c_);
  if (!tx.ok()) return fail(catalog_error::io);
  if (auto f = check_lease_locked(from); !f) return fail(f.error());
  // Never to a broker that stops (it would die owning the stream) or is dead.
  auto open = takes_streams(*c_, to);
  if (!open) return fail(catalog_error::io);
  if (!*open) return fail(catalog_error::unavailable);
  auto version = bump_ownership_locked();
  if (!version) return fail(version.error());
  const base::leader_epoch next(epoch.value() + 1);
  // One conditional statement: no commit of the stream can come between the check and the move.
  auto up = c_->query(
      "UPDATE streams SET owner = ?, epoch = ?, target = -1, owner_version = ? WHERE "
      "stream_id = ? AND owner = ? AND epoch = ? AND end_offset = ?",
      i64(to), i64(next), *version, i64(stream_id), i64(from), i64(epoch), i64(end));
  if (!up) return fail(catalog_error::io);
  if (up->changes == 0) {
    auto cur = c_->query("SELECT owner, epoch FROM streams WHERE stream_id = ?", i64(stream_id));
    if (!cur) return fail(catalog_error::io);
    if (cur->rows.empty() || node_at(cur->rows.front(), 0) != from ||
        epoch_at(cur->rows.front(), 1) != epoch) {
      return fail(catalog_error::fenced);
    }
    return fail(catalog_error::discontinuous);
  }
  if (!c_->query("INSERT INTO stream_epochs(stream_id, epoch, start_offset) VALUES(?, ?, ?) ON "
                 "CONFLICT DO NOTHING",
                 i64(stream_id), i64(next), i64(end))) {
    return fail(catalog_error::io);
  }
  if (!tx.commit()) return fail(catalog_error::io);
  return next;
}

tl::expected<std::vector<std::pair<base::stream_id, stream_state>>, catalog_error>
stream_catalog::take_over(base::node_id holder, const std::vector<base::node_id>& from) {
  base::lock_guard lock(mu_);
  sql::transaction tx(*c_);
  if (!tx.ok()) return fail(catalog_error::io);
  if (auto f = check_lease_locked(holder); !f) return fail(f.error());
  for (const base::node_id n : from) {
    auto held = takeover_held(*c_, n, holder);
    if (!held) return fail(catalog_error::io);
    if (!*held) return fail(catalog_error::fenced);
  }
  auto version = bump_ownership_locked();
  if (!version) return fail(version.error());
  std::vector<std::pair<base::stream_id, stream_state>> out;
  for (const base::node_id n : from) {
    // A stream an earlier holder took from `n` but did not finish with is taken again.
    auto up = c_->query(
        "UPDATE streams SET taken_from = CASE WHEN taken_from = -1 THEN owner ELSE taken_from END, "
        "owner = ?, epoch = epoch + 1, target = -1, owner_version = ? WHERE owner = ? OR "
        "taken_from = ? RETURNING stream_id, start_offset, end_offset, owner, epoch, target, "
        "taken_from",
        i64(holder), *version, i64(n), i64(n));
    if (!up) return fail(catalog_error::io);
    for (const row& r : up->rows) {
      out.emplace_back(stream_id_at(r, 0), state_row(r, 1));
      const auto& [id, st] = out.back();
      if (!c_->query("INSERT INTO stream_epochs(stream_id, epoch, start_offset) VALUES(?, ?, ?) "
                     "ON CONFLICT DO NOTHING",
                     i64(id), i64(st.epoch), i64(st.end_offset))) {
        return fail(catalog_error::io);
      }
    }
  }
  if (!tx.commit()) return fail(catalog_error::io);
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  return out;
}

tl::expected<size_t, catalog_error> stream_catalog::finish_take_over(
    base::node_id holder, const std::vector<base::node_id>& from) {
  base::lock_guard lock(mu_);
  sql::transaction tx(*c_);
  if (!tx.ok()) return fail(catalog_error::io);
  size_t ended = 0;
  for (const base::node_id n : from) {
    auto held = takeover_held(*c_, n, holder);
    if (!held) return fail(catalog_error::io);
    if (!*held) continue;  // given to another holder, which takes the streams again
    if (!c_->query("UPDATE streams SET taken_from = -1 WHERE owner = ? AND taken_from = ?",
                   i64(holder), i64(n)) ||
        !c_->query("DELETE FROM wal_takeovers WHERE node_id = ? AND holder = ?", i64(n),
                   i64(holder))) {
      return fail(catalog_error::io);
    }
    ++ended;
  }
  if (!tx.commit()) return fail(catalog_error::io);
  return ended;
}

tl::expected<std::vector<epoch_start>, catalog_error> stream_catalog::epochs(
    base::stream_id stream_id) {
  base::lock_guard lock(mu_);
  auto r =
      c_->query("SELECT epoch, start_offset FROM stream_epochs WHERE stream_id = ? ORDER BY epoch",
                i64(stream_id));
  if (!r) return fail(catalog_error::io);
  std::vector<epoch_start> out;
  out.reserve(r->rows.size());
  for (const row& s : r->rows) {
    out.push_back({epoch_at(s, 0), offset_at(s, 1)});
  }
  return out;
}

tl::expected<std::vector<uint8_t>, catalog_error> stream_catalog::producer_state(
    base::stream_id stream_id) {
  base::lock_guard lock(mu_);
  auto r = c_->query("SELECT data FROM producer_states WHERE stream_id = ?", i64(stream_id));
  if (!r) return fail(catalog_error::io);
  if (r->rows.empty()) return std::vector<uint8_t>();
  return r->rows.front().blob(0);
}

tl::expected<void, catalog_error> stream_catalog::put_producer_state(
    base::stream_id stream_id, base::node_id owner, base::leader_epoch epoch,
    const std::vector<uint8_t>& data) {
  base::lock_guard lock(mu_);
  sql::transaction tx(*c_);
  if (!tx.ok()) return fail(catalog_error::io);
  if (auto f = check_owner_locked(stream_id, owner, epoch); !f) return f;
  if (auto f = check_lease_locked(owner); !f) return f;
  auto r = data.empty()
               ? c_->query("DELETE FROM producer_states WHERE stream_id = ?", i64(stream_id))
               : c_->query(
                     "INSERT INTO producer_states(stream_id, data) VALUES(?, ?) "
                     "ON CONFLICT(stream_id) DO UPDATE SET data = excluded.data",
                     i64(stream_id), sql::bytes_view{data});
  if (!r || !tx.commit()) return fail(catalog_error::io);
  return {};
}

tl::expected<void, catalog_error> stream_catalog::drop_streams(
    const std::vector<base::stream_id>& ids) {
  base::lock_guard lock(mu_);
  sql::transaction tx(*c_);
  if (!tx.ok()) return fail(catalog_error::io);
  for (base::stream_id id : ids) {
    for (const char* q :
         {"DELETE FROM ranges WHERE stream_id = ?", "DELETE FROM streams WHERE stream_id = ?",
          "DELETE FROM stream_epochs WHERE stream_id = ?",
          "DELETE FROM producer_states WHERE stream_id = ?"}) {
      if (!c_->query(q, i64(id))) return fail(catalog_error::io);
    }
  }
  if (!mark_orphans_deleting_locked()) return fail(catalog_error::io);
  if (!tx.commit()) return fail(catalog_error::io);
  return {};
}

tl::expected<std::vector<object_record>, catalog_error> stream_catalog::objects(object_kind kind) {
  base::lock_guard lock(mu_);
  auto r = c_->query(
      "SELECT object_id, key, size, kind, created_ms FROM objects WHERE kind = ? AND "
      "deleting_ms IS NULL ORDER BY object_id",
      static_cast<int64_t>(kind));
  if (!r) return fail(catalog_error::io);
  std::vector<object_record> out;
  out.reserve(r->rows.size());
  for (const row& s : r->rows) out.push_back(object_row(s));
  return out;
}

tl::expected<std::vector<object_record>, catalog_error> stream_catalog::deletable(
    int64_t before_ms) {
  base::lock_guard lock(mu_);
  auto r = c_->query(
      "SELECT object_id, key, size, kind, created_ms FROM objects WHERE deleting_ms IS "
      "NOT NULL AND deleting_ms <= ? AND NOT EXISTS (SELECT 1 FROM ranges WHERE "
      "ranges.object_id = objects.object_id) ORDER BY object_id",
      before_ms);
  if (!r) return fail(catalog_error::io);
  std::vector<object_record> out;
  out.reserve(r->rows.size());
  for (const row& s : r->rows) out.push_back(object_row(s));
  return out;
}

tl::expected<void, catalog_error> stream_catalog::forget(uint64_t object_id) {
  base::lock_guard lock(mu_);
  auto r = c_->query("DELETE FROM objects WHERE object_id = ? AND deleting_ms IS NOT NULL",
                     i64(object_id));
  if (!r) return fail(catalog_error::io);
  if (r->changes == 0) return fail(catalog_error::unknown_object);
  return {};
}

tl::expected<uint64_t, catalog_error> stream_catalog::last_object_id() {
  base::lock_guard lock(mu_);
  auto r = c_->query("SELECT value FROM counters WHERE name = 'object_id'");
  if (!r || r->rows.empty()) return fail(catalog_error::io);
  return static_cast<uint64_t>(r->rows.front().integer(0));
}

tl::expected<std::vector<std::string>, catalog_error> stream_catalog::object_keys() {
  base::lock_guard lock(mu_);
  auto r = c_->query("SELECT key FROM objects");
  if (!r) return fail(catalog_error::io);
  std::vector<std::string> out;
  out.reserve(r->rows.size());
  for (const row& s : r->rows) out.push_back(s.text(0));
  // Byte order, whatever the database's collation.
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace silt::metadata
