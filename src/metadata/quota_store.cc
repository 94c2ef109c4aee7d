#include "metadata/quota_store.h"

#include <array>
#include <cstdio>
#include <cstdlib>

#include "metadata/row_key.h"

namespace silt::metadata {

namespace {

// The row key of an entity: SHA-256 of its parts, each its kind, then its name
// length-prefixed (names may be long; an index on them would not fit PostgreSQL's index rows).
std::string key_of(const quota_entity& e) {
  std::string canonical;
  for (const auto* p : {&e.user, &e.client_id}) {
    canonical += std::to_string(static_cast<int>(p->k));
    canonical += ':';
    canonical += std::to_string(p->name.size());
    canonical += ':';
    canonical += p->name;
  }
  return row_key_digest(canonical);
}

// Values are stored as text, which both databases keep exactly: the shortest decimal that reads
// back as the same double.
std::string value_text(double v) {
  std::array<char, 32> buf{};
  for (int precision = 15; precision <= 17; ++precision) {
    std::snprintf(buf.data(), buf.size(), "%.*g", precision, v);
    if (std::strtod(buf.data(), nullptr) == v) break;
  }
  return buf.data();
}

quota_entity_part part_of(int64_t kind, const std::string& name) {
  switch (kind) {
    case 1:
      return quota_entity_part::default_name();
    case 2:
      return quota_entity_part::named(name);
    default:
      return quota_entity_part::absent();
  }
}

tl::unexpected<std::string> fail(const char* what) {
  return tl::make_unexpected(std::string("the client quota store: ") + what);
}

}  // namespace

tl::expected<std::unique_ptr<quota_store>, std::string> quota_store::open(
    std::shared_ptr<sql::database> db) {
  auto c = db->connect();
  if (!c) return tl::make_unexpected(c.error());
  return std::unique_ptr<quota_store>(new quota_store(std::move(db), std::move(*c)));
}

quota_store::~quota_store() = default;

tl::expected<quota_map, std::string> quota_store::read_all_locked() {
  auto counter = c_->query("SELECT value FROM registry_counters WHERE name = 'quotas_changed'");
  if (!counter || counter->rows.empty()) return fail("cannot read its change counter");
  const int64_t at = counter->rows.front().integer(0);
  auto rows = c_->query(
      "SELECT user_kind, user_name, client_kind, client_name, quota_key, value "
      "FROM client_quotas");
  if (!rows) return fail("cannot read the quotas");
  quota_map out;
  for (const auto& r : rows->rows) {
    const quota_entity e{.user = part_of(r.integer(0), r.text(1)),
                         .client_id = part_of(r.integer(2), r.text(3))};
    // A row this broker cannot read (no part, an unknown kind) applies to nothing.
    if (!e.user.present() && !e.client_id.present()) continue;
    char* end = nullptr;
    const double v = std::strtod(r.text(5).c_str(), &end);
    if (end == r.text(5).c_str()) continue;
    out[e][r.text(4)] = v;
  }
  seen_ = at;
  return out;
}

tl::expected<quota_map, std::string> quota_store::load() {
  base::lock_guard lock(db_mu_);
  return read_all_locked();
}

tl::expected<std::optional<quota_map>, std::string> quota_store::refresh() {
  base::lock_guard lock(db_mu_);
  auto counter = c_->query("SELECT value FROM registry_counters WHERE name = 'quotas_changed'");
  if (!counter || counter->rows.empty()) return fail("cannot read its change counter");
  if (counter->rows.front().integer(0) == seen_) return std::nullopt;
  auto all = read_all_locked();
  if (!all) return tl::make_unexpected(all.error());
  return std::optional(std::move(*all));
}

tl::expected<void, std::string> quota_store::alter(std::span<const quota_change> changes) {
  base::lock_guard lock(db_mu_);
  sql::transaction tx(*c_);
  if (!tx.ok()) return fail("cannot begin a transaction");
  auto counter = c_->query(
      "UPDATE registry_counters SET value = value + 1 WHERE name = 'quotas_changed' "
      "RETURNING value");
  if (!counter || counter->rows.empty()) return fail("cannot count a change");
  const int64_t at = counter->rows.front().integer(0);
  for (const auto& ch : changes) {
    const auto key = key_of(ch.entity);
    if (!ch.value) {
      if (!c_->query("DELETE FROM client_quotas WHERE entity_key = ? AND quota_key = ?",
                     std::string_view(key), std::string_view(ch.key))) {
        return fail("cannot delete a quota");
      }
      continue;
    }
    const auto text = value_text(*ch.value);
    if (!c_->query("INSERT INTO client_quotas(entity_key, user_kind, user_name, client_kind, "
                   "client_name, quota_key, value) VALUES(?,?,?,?,?,?,?) "
                   "ON CONFLICT(entity_key, quota_key) DO UPDATE SET value = excluded.value",
                   std::string_view(key), static_cast<int64_t>(ch.entity.user.k),
                   std::string_view(ch.entity.user.name),
                   static_cast<int64_t>(ch.entity.client_id.k),
                   std::string_view(ch.entity.client_id.name), std::string_view(ch.key),
                   std::string_view(text))) {
      return fail("cannot store a quota");
    }
  }
  if (!tx.commit()) return fail("cannot commit a change");
  // Nothing else changed in between when this change follows the last one seen; else the next
  // refresh() reads everything again.
  if (at == seen_ + 1) seen_ = at;
  return {};
}

}  // namespace silt::metadata
