// The credential store: the SCRAM credentials of the cluster's users (table scram_credentials,
// docs/formats/metadata.md), so that every broker on one metadata store authenticates the same
// users, whichever broker AlterUserScramCredentials went through.
//
// SASL exchanges look credentials up on network threads (security::scram_credential_source):
// they read an in-memory snapshot under mu_, which never waits on the database. Changes are one
// transaction each, written through to the snapshot when they commit; refresh() takes in the
// changes of other brokers (the node's follow loop calls it every round: one read of the
// `security_changed` counter while nothing changed, else every credential read again).
// Thread-safe: db_mu_ guards the connection and serialises changes, mu_ the snapshot; order
// db_mu_ before mu_. Owned by the broker (app/node.h) for its lifetime.
//
// ACLs are to be kept here too when they come: their table read with the credentials by
// read_all_locked() into the snapshot, their changes counted by the same counter.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <tl/expected.hpp>

#include "base/mutex.h"
#include "metadata/sql.h"
#include "security/scram.h"

namespace silt::metadata {

enum class credential_error : uint8_t {
  io,  // the database failed (logged)
};

// One change of a user's credentials, as AlterUserScramCredentials asks for it.
struct credential_change {
  std::string user;
  security::scram_algorithm mechanism = security::scram_algorithm::sha256;
  // The credential to store (replacing the one the user has for the mechanism); none deletes it.
  std::optional<security::scram_credential> credential;
};

// A user's credential for one mechanism as DescribeUserScramCredentials shows it.
struct credential_info {
  security::scram_algorithm mechanism = security::scram_algorithm::sha256;
  int32_t iterations = 0;
  bool operator==(const credential_info&) const = default;
};

class credential_store final : public security::scram_credential_source {
 public:
  // Opens the store in `db` and loads every credential.
  [[nodiscard]] static tl::expected<std::unique_ptr<credential_store>, std::string> open(
      std::shared_ptr<sql::database> db);
  // The same on open_database(uri); a bare path is an SQLite database.
  [[nodiscard]] static tl::expected<std::unique_ptr<credential_store>, std::string> open(
      const std::string& uri);
  ~credential_store() override;

  // The user's credential for the mechanism (from memory; for SASL exchanges).
  [[nodiscard]] std::optional<security::scram_credential> find(
      std::string_view user, security::scram_algorithm a) const override;
  // Whether the user has a credential for the mechanism (without copying it).
  [[nodiscard]] bool has(std::string_view user, security::scram_algorithm a) const;
  // The mechanisms the user has a credential for, SCRAM-SHA-256 first (empty: none).
  [[nodiscard]] std::vector<credential_info> describe(std::string_view user) const;
  // Every user with a credential, by name.
  [[nodiscard]] std::vector<std::string> users() const;

  // Applies `changes` in one transaction: all of them or, on an error, none. A deletion of a
  // credential the user does not have (any more: another broker may have deleted it since this
  // one last refreshed) changes nothing and is false in the result, by index; every other
  // change is true. Blocks on the database: on the blocking pool only.
  [[nodiscard]] tl::expected<std::vector<bool>, credential_error> alter(
      const std::vector<credential_change>& changes);

  // Takes in the changes other stores (other brokers) made in the database: one read of a
  // change counter when nothing changed, else every credential is read again. True when
  // something changed. Blocks on the database.
  [[nodiscard]] tl::expected<bool, credential_error> refresh();

  // The change counter's value at the last change this store made (0: none).
  [[nodiscard]] int64_t last_change() const { return last_change_.load(std::memory_order_acquire); }

 private:
  // By user, then by mechanism.
  using credential_map =
      std::map<std::string, std::map<security::scram_algorithm, security::scram_credential>,
               std::less<>>;

  credential_store(std::shared_ptr<sql::database> db, std::unique_ptr<sql::connection> c)
      : db_(std::move(db)), c_(std::move(c)) {}
  // Everything stored, and the change counter read before it.
  tl::expected<std::pair<credential_map, int64_t>, credential_error> read_all_locked()
      REQUIRES(db_mu_);
  [[nodiscard]] tl::expected<int64_t, credential_error> read_counter_locked() REQUIRES(db_mu_);

  mutable base::mutex db_mu_;
  mutable base::mutex mu_;
  std::shared_ptr<sql::database> db_;
  std::unique_ptr<sql::connection> c_ GUARDED_BY(db_mu_);
  credential_map credentials_ GUARDED_BY(mu_);
  int64_t seen_ GUARDED_BY(db_mu_) = 0;  // the change counter the snapshot reflects
  std::atomic<int64_t> last_change_{0};  // moved under db_mu_, read without it
};

}  // namespace silt::metadata
