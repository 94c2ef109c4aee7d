#include "metadata/acl_store.h"

#include "metadata/row_key.h"

namespace silt::metadata {

namespace {

// The row key of an ACL: SHA-256 of its fields, length-prefixed (names and principals may be
// long; an index on them would not fit PostgreSQL's index rows).
std::string key_of(const security::acl_binding& b) {
  std::string canonical;
  auto add = [&canonical](std::string_view s) {
    canonical += std::to_string(s.size());
    canonical += ':';
    canonical += s;
  };
  add(std::to_string(static_cast<int>(b.resource_type)));
  add(b.resource_name);
  add(std::to_string(static_cast<int>(b.pattern_type)));
  add(b.principal);
  add(b.host);
  add(std::to_string(static_cast<int>(b.operation)));
  add(std::to_string(static_cast<int>(b.permission_type)));
  return row_key_digest(canonical);
}

tl::unexpected<std::string> fail(const char* what) {
  return tl::make_unexpected(std::string("the ACL store: ") + what);
}

}  // namespace

tl::expected<std::unique_ptr<acl_store>, std::string> acl_store::open(
    std::shared_ptr<sql::database> db) {
  auto c = db->connect();
  if (!c) return tl::make_unexpected(c.error());
  return std::unique_ptr<acl_store>(new acl_store(std::move(db), std::move(*c)));
}

acl_store::~acl_store() = default;

tl::expected<std::vector<security::acl_binding>, std::string> acl_store::read_all_locked() {
  auto counter = c_->query("SELECT value FROM registry_counters WHERE name = 'acls_changed'");
  if (!counter || counter->rows.empty()) return fail("cannot read its change counter");
  const int64_t at = counter->rows.front().integer(0);
  auto rows = c_->query(
      "SELECT resource_type, resource_name, pattern_type, principal, host, operation, "
      "permission_type FROM acls");
  if (!rows) return fail("cannot read the ACLs");
  std::vector<security::acl_binding> out;
  out.reserve(rows->rows.size());
  for (const auto& r : rows->rows) {
    security::acl_binding b;
    b.resource_type = security::resource_type_from_code(static_cast<int8_t>(r.integer(0)));
    b.resource_name = r.text(1);
    b.pattern_type = security::pattern_type_from_code(static_cast<int8_t>(r.integer(2)));
    b.principal = r.text(3);
    b.host = r.text(4);
    b.operation = security::operation_from_code(static_cast<int8_t>(r.integer(5)));
    b.permission_type = security::permission_type_from_code(static_cast<int8_t>(r.integer(6)));
    out.push_back(std::move(b));
  }
  seen_ = at;
  return out;
}

tl::expected<std::vector<security::acl_binding>, std::string> acl_store::load() {
  base::lock_guard lock(db_mu_);
  return read_all_locked();
}

tl::expected<std::optional<std::vector<security::acl_binding>>, std::string> acl_store::refresh() {
  base::lock_guard lock(db_mu_);
  return refresh_locked();
}

tl::expected<void, std::string> acl_store::follow(security::authorizer& into) {
  base::lock_guard lock(db_mu_);
  auto changed = refresh_locked();
  if (!changed) return tl::make_unexpected(changed.error());
  if (*changed) into.replace(std::move(**changed));
  return {};
}

tl::expected<void, std::string> acl_store::alter(std::span<const security::acl_binding> added,
                                                 std::span<const security::acl_binding> removed) {
  base::lock_guard lock(db_mu_);
  return alter_locked(added, removed);
}

tl::expected<void, std::string> acl_store::alter(std::span<const security::acl_binding> added,
                                                 std::span<const security::acl_binding> removed,
                                                 security::authorizer& into) {
  base::lock_guard lock(db_mu_);
  if (auto ok = alter_locked(added, removed); !ok) return ok;
  into.apply(added, removed);
  return {};
}

tl::expected<std::optional<std::vector<security::acl_binding>>, std::string>
acl_store::refresh_locked() {
  auto counter = c_->query("SELECT value FROM registry_counters WHERE name = 'acls_changed'");
  if (!counter || counter->rows.empty()) return fail("cannot read its change counter");
  if (counter->rows.front().integer(0) == seen_) return std::nullopt;
  auto all = read_all_locked();
  if (!all) return tl::make_unexpected(all.error());
  return std::optional(std::move(*all));
}

tl::expected<void, std::string> acl_store::alter_locked(
    std::span<const security::acl_binding> added, std::span<const security::acl_binding> removed) {
  sql::transaction tx(*c_);
  if (!tx.ok()) return fail("cannot begin a transaction");
  auto counter = c_->query(
      "UPDATE registry_counters SET value = value + 1 WHERE name = 'acls_changed' "
      "RETURNING value");
  if (!counter || counter->rows.empty()) return fail("cannot count a change");
  const int64_t at = counter->rows.front().integer(0);
  for (const auto& b : removed) {
    if (!c_->query("DELETE FROM acls WHERE key = ?", std::string_view(key_of(b)))) {
      return fail("cannot delete an ACL");
    }
  }
  for (const auto& b : added) {
    const auto key = key_of(b);
    if (!c_->query(
            "INSERT INTO acls(key, resource_type, resource_name, pattern_type, principal, host, "
            "operation, permission_type) VALUES(?,?,?,?,?,?,?,?) ON CONFLICT DO NOTHING",
            std::string_view(key), static_cast<int64_t>(b.resource_type),
            std::string_view(b.resource_name), static_cast<int64_t>(b.pattern_type),
            std::string_view(b.principal), std::string_view(b.host),
            static_cast<int64_t>(b.operation), static_cast<int64_t>(b.permission_type))) {
      return fail("cannot store an ACL");
    }
  }
  if (!tx.commit()) return fail("cannot commit a change");
  // Nothing else changed in between when this change follows the last one seen; else the next
  // refresh() reads everything again.
  if (at == seen_ + 1) seen_ = at;
  return {};
}

}  // namespace silt::metadata
