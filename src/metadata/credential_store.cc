#include "metadata/credential_store.h"

namespace silt::metadata {

namespace {

using security::scram_algorithm;
using security::scram_credential;
using sql::row;
using sql::transaction;

tl::unexpected<credential_error> fail(credential_error e) {
  return tl::make_unexpected(e);
}

constexpr scram_algorithm algorithms[] = {scram_algorithm::sha256, scram_algorithm::sha512};

}  // namespace

tl::expected<std::unique_ptr<credential_store>, std::string> credential_store::open(
    std::shared_ptr<sql::database> db) {
  auto c = db->connect();
  if (!c) return tl::make_unexpected(c.error());
  std::unique_ptr<credential_store> s(new credential_store(std::move(db), std::move(*c)));
  base::lock_guard db_lock(s->db_mu_);
  auto all = s->read_all_locked();
  if (!all) return tl::make_unexpected("cannot load the credentials from " + s->db_->describe());
  s->seen_ = all->second;
  base::lock_guard lock(s->mu_);
  s->credentials_ = std::move(all->first);
  return s;
}

tl::expected<std::unique_ptr<credential_store>, std::string> credential_store::open(
    const std::string& uri) {
  auto db = sql::open_database(uri);
  if (!db) return tl::make_unexpected(db.error());
  return open(std::move(*db));
}

credential_store::~credential_store() = default;

tl::expected<int64_t, credential_error> credential_store::read_counter_locked() {
  auto r = c_->query("SELECT value FROM registry_counters WHERE name = 'security_changed'");
  if (!r || r->rows.empty()) return fail(credential_error::io);
  return r->rows.front().integer(0);
}

tl::expected<std::pair<credential_store::credential_map, int64_t>, credential_error>
credential_store::read_all_locked() {
  // The counter first: a change committed after it is seen again at the next refresh.
  auto at = read_counter_locked();
  if (!at) return fail(at.error());
  auto rs = c_->query(
      "SELECT user_name, mechanism, salt, stored_key, server_key, iterations "
      "FROM scram_credentials");
  if (!rs) return fail(credential_error::io);
  credential_map out;
  for (const row& r : rs->rows) {
    // A mechanism a later version added is not this one's to use.
    const auto a = security::scram_algorithm_of(r.text(1));
    if (!a) continue;
    scram_credential c;
    c.salt = r.blob(2);
    c.stored_key = r.blob(3);
    c.server_key = r.blob(4);
    c.iterations = static_cast<int32_t>(r.integer(5));
    out[r.text(0)][*a] = std::move(c);
  }
  return std::pair(std::move(out), *at);
}

std::optional<scram_credential> credential_store::find(std::string_view user,
                                                       scram_algorithm a) const {
  base::lock_guard lock(mu_);
  auto it = credentials_.find(user);
  if (it == credentials_.end()) return std::nullopt;
  auto c = it->second.find(a);
  if (c == it->second.end()) return std::nullopt;
  return c->second;
}

bool credential_store::has(std::string_view user, scram_algorithm a) const {
  base::lock_guard lock(mu_);
  auto it = credentials_.find(user);
  return it != credentials_.end() && it->second.contains(a);
}

std::vector<credential_info> credential_store::describe(std::string_view user) const {
  base::lock_guard lock(mu_);
  std::vector<credential_info> out;
  auto it = credentials_.find(user);
  if (it == credentials_.end()) return out;
  for (const scram_algorithm a : algorithms) {
    auto c = it->second.find(a);
    if (c != it->second.end()) out.push_back({a, c->second.iterations});
  }
  return out;
}

std::vector<std::string> credential_store::users() const {
  base::lock_guard lock(mu_);
  std::vector<std::string> out;
  out.reserve(credentials_.size());
  for (const auto& [user, creds] : credentials_) out.push_back(user);
  return out;
}

tl::expected<std::vector<bool>, credential_error> credential_store::alter(
    const std::vector<credential_change>& changes) {
  base::lock_guard db_lock(db_mu_);
  std::vector<bool> applied(changes.size(), true);
  transaction tx(*c_);
  if (!tx.ok()) return fail(credential_error::io);
  // Counted first: on PostgreSQL the counter's row lock orders concurrent changes, so that a
  // deletion below sees every change committed before it.
  auto counted = c_->query(
      "UPDATE registry_counters SET value = value + 1 WHERE name = 'security_changed' "
      "RETURNING value");
  if (!counted || counted->rows.empty()) return fail(credential_error::io);
  const int64_t v = counted->rows.front().integer(0);
  for (size_t i = 0; i < changes.size(); ++i) {
    const auto& ch = changes[i];
    const auto mechanism = security::scram_mechanism_name(ch.mechanism);
    if (!ch.credential) {
      auto r = c_->query("DELETE FROM scram_credentials WHERE user_name = ? AND mechanism = ?",
                         std::string_view(ch.user), mechanism);
      if (!r) return fail(credential_error::io);
      applied[i] = r->changes > 0;
      continue;
    }
    const auto& c = *ch.credential;
    if (!c_->query("INSERT INTO scram_credentials(user_name, mechanism, salt, stored_key, "
                   "server_key, iterations) VALUES(?,?,?,?,?,?) "
                   "ON CONFLICT(user_name, mechanism) DO UPDATE SET salt = excluded.salt, "
                   "stored_key = excluded.stored_key, server_key = excluded.server_key, "
                   "iterations = excluded.iterations",
                   std::string_view(ch.user), mechanism, sql::bytes_view{c.salt},
                   sql::bytes_view{c.stored_key}, sql::bytes_view{c.server_key},
                   static_cast<int64_t>(c.iterations))) {
      return fail(credential_error::io);
    }
  }
  if (!tx.commit()) return fail(credential_error::io);
  // Nothing else changed in between if the counter follows the last value seen: the snapshot
  // then reflects it once this change is in; else the next refresh reads everything.
  if (v == seen_ + 1) seen_ = v;
  last_change_.store(v, std::memory_order_release);
  base::lock_guard lock(mu_);
  for (size_t i = 0; i < changes.size(); ++i) {
    const auto& ch = changes[i];
    if (ch.credential) {
      credentials_[ch.user][ch.mechanism] = *ch.credential;
      continue;
    }
    auto it = credentials_.find(ch.user);
    if (it == credentials_.end()) continue;
    it->second.erase(ch.mechanism);
    if (it->second.empty()) credentials_.erase(it);
  }
  return applied;
}

tl::expected<bool, credential_error> credential_store::refresh() {
  base::lock_guard db_lock(db_mu_);
  auto counter = read_counter_locked();
  if (!counter) return fail(counter.error());
  if (*counter == seen_) return false;
  auto all = read_all_locked();
  if (!all) return fail(all.error());
  seen_ = all->second;
  base::lock_guard lock(mu_);
  credentials_ = std::move(all->first);
  return true;
}

}  // namespace silt::metadata
