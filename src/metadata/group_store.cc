#include "metadata/group_store.h"

#include <algorithm>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "metadata/broker_registry.h"

namespace silt::metadata {

namespace {

using sql::row;

tl::unexpected<group_store_error> fail(group_store_error e) {
  return tl::make_unexpected(e);
}

int64_t i64(base::node_id v) {
  return v.value();
}

base::leader_epoch epoch_at(const row& r, size_t col) {
  return base::leader_epoch(static_cast<int32_t>(r.integer(col)));
}

int32_t i32_at(const row& r, size_t col) {
  return static_cast<int32_t>(r.integer(col));
}

// Rows (or shards, or keys) per multi-row statement. An OffsetCommit of thousands of partitions
// is a few dozen statements, not thousands of round trips to PostgreSQL; parameters per
// statement stay far below both databases' limits (SQLite's is 32766, PostgreSQL's 65535).
constexpr size_t shard_chunk = 256;   // take(), load(), the fence check: one or two parameters
constexpr size_t offset_chunk = 128;  // offset upserts: nine parameters a row
constexpr size_t key_chunk = 128;     // offset deletions: three parameters a key
constexpr size_t group_chunk = 128;   // group upserts (three parameters) and deletions (one)

// How many of `left` items the next statement carries: the largest power of two up to `most`,
// so that a handful of statement texts (each prepared once per connection) cover any count.
size_t chunk_size(size_t left, size_t most) {
  size_t n = most;
  while (n > left) n /= 2;
  return n;
}

// Calls `f` with consecutive chunks of `items` until it returns false; false if it did.
template <typename T, typename F>
bool each_chunk(std::span<const T> items, size_t most, F&& f) {
  for (size_t at = 0; at < items.size();) {
    const size_t n = chunk_size(items.size() - at, most);
    if (!f(items.subspan(at, n))) return false;
    at += n;
  }
  return true;
}

// `item` repeated n times, separated by `sep`.
std::string repeated(size_t n, std::string_view item, std::string_view sep) {
  std::string out;
  out.reserve(n * (item.size() + sep.size()));
  for (size_t i = 0; i < n; ++i) {
    if (i > 0) out += sep;
    out += item;
  }
  return out;
}

// Each shard once, ascending: the order take() and the fence check lock shard rows in on
// PostgreSQL, so that a take and an apply never wait for each other in a cycle.
std::vector<int32_t> sorted_unique(std::span<const int32_t> shards) {
  std::vector<int32_t> out(shards.begin(), shards.end());
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

// The last entry of each key, in key order. PostgreSQL refuses a multi-row upsert that
// touches one row twice; the last entry is the one a write means. Key order also makes
// concurrent transactions lock rows in one order.
template <typename T, typename Key>
std::vector<const T*> last_of_each(const std::vector<T>& items, Key key) {
  std::vector<const T*> all;
  all.reserve(items.size());
  for (const T& t : items) all.push_back(&t);
  std::stable_sort(all.begin(), all.end(),
                   [&](const T* a, const T* b) { return key(*a) < key(*b); });
  std::vector<const T*> out;
  out.reserve(all.size());
  for (size_t i = 0; i < all.size(); ++i) {
    if (i + 1 == all.size() || key(*all[i]) < key(*all[i + 1])) out.push_back(all[i]);
  }
  return out;
}

// The owner and epoch of each of `shards` that has been taken (`shards` sorted). On
// PostgreSQL the rows stay share-locked until the transaction ends: a take() of one of them
// (an update of its row) waits until this transaction has committed, and a take() that
// committed first is seen, so that a shard cannot change hands between the check and the
// writes it admits. SQLite needs no lock: begin() took the database's write lock.
using shard_holders = std::unordered_map<int32_t, std::pair<base::node_id, base::leader_epoch>>;
tl::expected<shard_holders, group_store_error> holders(sql::connection& c,
                                                       std::span<const int32_t> shards) {
  const std::string_view lock = c.kind() == sql::dialect::postgresql ? " FOR SHARE" : "";
  shard_holders out;
  std::vector<sql::param> params;
  const bool ok = each_chunk(shards, shard_chunk, [&](std::span<const int32_t> chunk) {
    params.assign(chunk.begin(), chunk.end());
    auto r = c.run("SELECT shard, owner, epoch FROM coordinator_shards WHERE shard IN (" +
                       repeated(chunk.size(), "?", ", ") + ") ORDER BY shard" + std::string(lock),
                   params);
    if (!r) return false;
    for (const row& s : r->rows) {
      out.emplace(i32_at(s, 0), std::pair(base::node_id(i32_at(s, 1)), epoch_at(s, 2)));
    }
    return true;
  });
  if (!ok) return fail(group_store_error::io);
  return out;
}

// The changes of one shard whose writer holds it. Deletions first, then insertions: a group
// deleted and created again since the writer's last write ends up with its new rows.
bool write_shard(sql::connection& c, const shard_write& w) {
  const int64_t shard = w.shard;
  std::vector<sql::param> params;
  // Deleted groups: their rows and all their offsets. Rows are found by key, not by shard (a
  // group's rows are always under its own shard; SQLite would otherwise scan the shard index).
  const bool groups_deleted = each_chunk<std::string>(
      w.deleted_groups, group_chunk, [&](std::span<const std::string> chunk) {
        params.assign(chunk.begin(), chunk.end());
        const std::string in = " WHERE group_id IN (" + repeated(chunk.size(), "?", ", ") + ")";
        return c.run("DELETE FROM group_offsets" + in, params) &&
               c.run("DELETE FROM consumer_groups" + in, params);
      });
  if (!groups_deleted) return false;

  const bool offsets_deleted =
      each_chunk<offset_key>(w.deleted_offsets, key_chunk, [&](std::span<const offset_key> chunk) {
        params.clear();
        for (const offset_key& k : chunk) {
          params.insert(params.end(), {std::string_view(k.group), std::string_view(k.topic),
                                       int64_t{k.partition}});
        }
        return c
            .run("DELETE FROM group_offsets WHERE " +
                     repeated(chunk.size(), "(group_id = ? AND topic = ? AND partition = ?)",
                              " OR "),
                 params)
            .has_value();
      });
  if (!offsets_deleted) return false;

  const auto groups =
      last_of_each(w.groups, [](const group_record& g) -> const std::string& { return g.group; });
  const bool groups_written = each_chunk<
      const group_record*>(groups, group_chunk, [&](std::span<const group_record* const> chunk) {
    params.clear();
    for (const group_record* g : chunk) {
      params.insert(params.end(), {std::string_view(g->group), shard, sql::bytes_view{g->data}});
    }
    return c
        .run("INSERT INTO consumer_groups(group_id, shard, data) VALUES " +
                 repeated(chunk.size(), "(?, ?, ?)", ", ") +
                 " ON CONFLICT(group_id) DO UPDATE SET shard = excluded.shard, "
                 "data = excluded.data",
             params)
        .has_value();
  });
  if (!groups_written) return false;

  const auto offsets =
      last_of_each(w.offsets, [](const committed_offset& o) -> const offset_key& { return o.key; });
  return each_chunk<const committed_offset*>(
      offsets, offset_chunk, [&](std::span<const committed_offset* const> chunk) {
        params.clear();
        for (const committed_offset* o : chunk) {
          params.insert(params.end(),
                        {std::string_view(o->key.group), std::string_view(o->key.topic),
                         int64_t{o->key.partition}, shard, o->offset, int64_t{o->leader_epoch},
                         std::string_view(o->metadata), o->commit_ms, o->expire_ms});
        }
        return c
            .run(
                "INSERT INTO group_offsets(group_id, topic, partition, shard, committed_offset, "
                "leader_epoch, metadata, commit_ms, expire_ms) VALUES " +
                    repeated(chunk.size(), "(?, ?, ?, ?, ?, ?, ?, ?, ?)", ", ") +
                    " ON CONFLICT(group_id, topic, partition) DO UPDATE SET "
                    "shard = excluded.shard, committed_offset = excluded.committed_offset, "
                    "leader_epoch = excluded.leader_epoch, metadata = excluded.metadata, "
                    "commit_ms = excluded.commit_ms, expire_ms = excluded.expire_ms",
                params)
            .has_value();
      });
}

}  // namespace

tl::expected<std::unique_ptr<group_store>, std::string> group_store::open(
    std::shared_ptr<sql::database> db, base::node_id node) {
  auto c = db->connect();
  if (!c) return tl::make_unexpected(c.error());
  return std::unique_ptr<group_store>(new group_store(std::move(db), std::move(*c), node));
}

group_store::~group_store() = default;

tl::expected<std::vector<base::leader_epoch>, group_store_error> group_store::take(
    std::span<const int32_t> shards) {
  if (shards.empty()) return std::vector<base::leader_epoch>();
  const std::vector<int32_t> unique = sorted_unique(shards);
  base::lock_guard lock(mu_);
  sql::connection& c = *c_;
  sql::transaction tx(c);
  if (!tx.ok()) return fail(group_store_error::io);
  std::unordered_map<int32_t, base::leader_epoch> taken;
  taken.reserve(unique.size());
  std::vector<sql::param> params;
  const bool ok = each_chunk<int32_t>(unique, shard_chunk, [&](std::span<const int32_t> chunk) {
    params.clear();
    for (const int32_t s : chunk) params.insert(params.end(), {int64_t{s}, i64(node_)});
    // A shard never taken starts at epoch 0; any other moves to its next.
    auto up = c.run("INSERT INTO coordinator_shards(shard, owner, epoch) VALUES " +
                        repeated(chunk.size(), "(?, ?, 0)", ", ") +
                        " ON CONFLICT(shard) DO UPDATE SET owner = excluded.owner, "
                        "epoch = coordinator_shards.epoch + 1 RETURNING shard, epoch",
                    params);
    if (!up || up->rows.size() != chunk.size()) return false;
    for (const row& r : up->rows) taken[i32_at(r, 0)] = epoch_at(r, 1);
    return true;
  });
  if (!ok || !tx.commit()) return fail(group_store_error::io);
  std::vector<base::leader_epoch> out;
  out.reserve(shards.size());
  for (const int32_t s : shards) {
    const auto it = taken.find(s);
    if (it == taken.end()) return fail(group_store_error::io);
    out.push_back(it->second);
  }
  return out;
}

tl::expected<std::vector<shard_state>, group_store_error> group_store::shard_states() {
  base::lock_guard lock(mu_);
  auto r = c_->query("SELECT shard, owner, epoch, target FROM coordinator_shards ORDER BY shard");
  if (!r) return fail(group_store_error::io);
  std::vector<shard_state> out;
  out.reserve(r->rows.size());
  for (const row& s : r->rows) {
    out.push_back(
        {i32_at(s, 0), base::node_id(i32_at(s, 1)), epoch_at(s, 2), base::node_id(i32_at(s, 3))});
  }
  return out;
}

tl::expected<bool, group_store_error> group_store::in_use() {
  base::lock_guard lock(mu_);
  auto r = c_->query(
      "SELECT 1 WHERE EXISTS(SELECT 1 FROM group_offsets) OR EXISTS(SELECT 1 FROM "
      "consumer_groups)");
  if (!r) return fail(group_store_error::io);
  return !r->rows.empty();
}

tl::expected<void, group_store_error> group_store::place(std::span<const shard_target> targets,
                                                         base::node_id controller,
                                                         int64_t controller_epoch) {
  if (targets.empty()) return {};
  base::lock_guard lock(mu_);
  sql::connection& c = *c_;
  sql::transaction tx(c);
  if (!tx.ok()) return fail(group_store_error::io);
  auto holds = controller_holds(c, controller, controller_epoch);
  if (!holds) return fail(group_store_error::io);
  if (!*holds) return fail(group_store_error::fenced);
  for (const auto& t : targets) {
    // A shard never taken gets a row owned by nobody (-1, at epoch -1: its first take is
    // epoch 0).
    auto up = c.query(
        "INSERT INTO coordinator_shards(shard, owner, epoch, target) VALUES(?, -1, -1, ?) "
        "ON CONFLICT(shard) DO UPDATE SET target = excluded.target",
        int64_t{t.shard}, i64(t.target));
    if (!up) return fail(group_store_error::io);
  }
  if (!tx.commit()) return fail(group_store_error::io);
  return {};
}

tl::expected<group_store::loaded, group_store_error> group_store::load(
    std::span<const int32_t> shards) {
  const std::vector<int32_t> unique = sorted_unique(shards);
  base::lock_guard lock(mu_);
  sql::connection& c = *c_;
  // Not one transaction: the caller has taken these shards, so no other node changes them
  // meanwhile (only forget_topic() may, which either result reflects correctly).
  loaded out;
  std::vector<sql::param> params;
  const bool ok = each_chunk<int32_t>(unique, shard_chunk, [&](std::span<const int32_t> chunk) {
    params.assign(chunk.begin(), chunk.end());
    const std::string in = " WHERE shard IN (" + repeated(chunk.size(), "?", ", ") + ")";
    auto offsets = c.run(
        "SELECT group_id, topic, partition, committed_offset, leader_epoch, metadata, commit_ms, "
        "expire_ms FROM group_offsets" +
            in,
        params);
    auto groups = c.run("SELECT group_id, data FROM consumer_groups" + in, params);
    if (!offsets || !groups) return false;
    for (const row& r : offsets->rows) {
      out.offsets.push_back({{r.text(0), r.text(1), i32_at(r, 2)},
                             r.integer(3),
                             i32_at(r, 4),
                             r.text(5),
                             r.integer(6),
                             r.integer(7)});
    }
    for (const row& r : groups->rows) out.groups.push_back({r.text(0), r.blob(1)});
    return true;
  });
  if (!ok) return fail(group_store_error::io);
  return out;
}

tl::expected<std::vector<int32_t>, group_store_error> group_store::apply(
    std::span<const shard_write> writes) {
  std::vector<int32_t> fenced;
  if (writes.empty()) return fenced;
  std::vector<int32_t> shards;
  shards.reserve(writes.size());
  for (const shard_write& w : writes) shards.push_back(w.shard);
  shards = sorted_unique(shards);
  base::lock_guard lock(mu_);
  sql::connection& c = *c_;
  sql::transaction tx(c);
  if (!tx.ok()) return fail(group_store_error::io);
  // A broker whose lease lapsed writes nothing until it registered anew.
  auto lapsed = lease_lapsed(c, node_);
  if (!lapsed) return fail(group_store_error::io);
  if (*lapsed) return fail(group_store_error::lapsed);
  auto held = holders(c, shards);
  if (!held) return fail(held.error());
  // A shard is fenced if any of its writes is (a shard never taken has no row: nobody may
  // write it); then none of its writes is applied.
  for (const shard_write& w : writes) {
    const auto it = held->find(w.shard);
    if ((it == held->end() || it->second != std::pair(node_, w.epoch)) &&
        std::find(fenced.begin(), fenced.end(), w.shard) == fenced.end()) {
      fenced.push_back(w.shard);
    }
  }
  for (const shard_write& w : writes) {
    if (std::find(fenced.begin(), fenced.end(), w.shard) != fenced.end()) continue;
    if (!write_shard(c, w)) return fail(group_store_error::io);
  }
  if (!tx.commit()) return fail(group_store_error::io);
  return fenced;
}

tl::expected<void, group_store_error> group_store::forget_topic(const std::string& topic) {
  base::lock_guard lock(mu_);
  if (!c_->query("DELETE FROM group_offsets WHERE topic = ?", std::string_view(topic))) {
    return fail(group_store_error::io);
  }
  return {};
}

}  // namespace silt::metadata
