// The ACL store: the cluster's ACLs (table acls, docs/formats/metadata.md), so that every broker
// on one metadata store authorizes alike, whichever broker CreateAcls or DeleteAcls went
// through.
//
// The authorizer (security/authorizer.h) holds the ACLs in memory for the request path; this
// store is where they last: alter() writes a change in one transaction, refresh() reads every
// ACL again once another broker changed them (one read of the `acls_changed` counter while
// nothing changed; the node's follow loop calls it every round, so a change reaches every
// broker within a tenth of a second or so). Every call blocks on the database: on the blocking
// pool or the follow loop's thread, never a network thread. Thread-safe (db_mu_ serialises the
// connection).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <tl/expected.hpp>

#include "base/mutex.h"
#include "metadata/sql.h"
#include "security/acl.h"
#include "security/authorizer.h"

namespace silt::metadata {

class acl_store {
 public:
  // Opens the store in `db`.
  [[nodiscard]] static tl::expected<std::unique_ptr<acl_store>, std::string> open(
      std::shared_ptr<sql::database> db);
  ~acl_store();
  acl_store(const acl_store&) = delete;
  acl_store& operator=(const acl_store&) = delete;

  // Every ACL as stored, and the change counter it reflects.
  [[nodiscard]] tl::expected<std::vector<security::acl_binding>, std::string> load()
      EXCLUDES(db_mu_);
  // Removes `removed` (those stored), then adds `added` (those not stored), in one transaction.
  [[nodiscard]] tl::expected<void, std::string> alter(
      std::span<const security::acl_binding> added, std::span<const security::acl_binding> removed)
      EXCLUDES(db_mu_);
  // Every ACL, when another broker changed them since the last load(), alter() or refresh();
  // none when nothing changed.
  [[nodiscard]] tl::expected<std::optional<std::vector<security::acl_binding>>, std::string>
  refresh() EXCLUDES(db_mu_);

  // refresh() and alter() applied to a broker's authorizer (its replace() and apply()) under the
  // store's lock, so that the authorizer takes this broker's changes and the others' in the
  // order the store made them: a refresh read before a local change is never published after
  // it.
  [[nodiscard]] tl::expected<void, std::string> follow(security::authorizer& into) EXCLUDES(db_mu_);
  [[nodiscard]] tl::expected<void, std::string> alter(
      std::span<const security::acl_binding> added, std::span<const security::acl_binding> removed,
      security::authorizer& into) EXCLUDES(db_mu_);

 private:
  acl_store(std::shared_ptr<sql::database> db, std::unique_ptr<sql::connection> c)
      : db_(std::move(db)), c_(std::move(c)) {}
  tl::expected<std::vector<security::acl_binding>, std::string> read_all_locked() REQUIRES(db_mu_);
  tl::expected<std::optional<std::vector<security::acl_binding>>, std::string> refresh_locked()
      REQUIRES(db_mu_);
  tl::expected<void, std::string> alter_locked(std::span<const security::acl_binding> added,
                                               std::span<const security::acl_binding> removed)
      REQUIRES(db_mu_);

  base::mutex db_mu_;
  std::shared_ptr<sql::database> db_;
  std::unique_ptr<sql::connection> c_ GUARDED_BY(db_mu_);
  int64_t seen_ GUARDED_BY(db_mu_) = -1;  // the counter value the last read reflects
};

}  // namespace silt::metadata
