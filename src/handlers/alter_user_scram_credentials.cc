// AlterUserScramCredentials (key 51, v0): sets and deletes users' SCRAM credentials, as Kafka
// 4.1's controller (ScramControlManager.alterCredentials). The client salts the password
// itself; the broker keeps StoredKey and ServerKey made from the salted password
// (security/scram.h) in the credential store, which every broker reads.
//
// Each deletion, then each upsertion, is checked in request order; once a user has an error,
// its later entries are ignored. A user named twice (deletions and upsertions together: one
// change per user and request) is DUPLICATE_RESOURCE, "A user credential cannot be altered twice
// in the same request", and none of its changes apply. An empty user is UNACCEPTABLE_CREDENTIAL
// ("Username must not be empty"), a mechanism other than 1 (SCRAM-SHA-256) and 2
// (SCRAM-SHA-512) UNSUPPORTED_SASL_MECHANISM ("Unknown SCRAM mechanism"), iterations below 4096
// or above 16384 UNACCEPTABLE_CREDENTIAL ("Too few iterations", "Too many iterations"), the
// deletion of a credential the user does not have RESOURCE_NOT_FOUND ("Attempt to delete a user
// credential that does not exist"). An empty salted password fails as Kafka's HMAC does with an
// empty key: UNKNOWN_SERVER_ERROR without a message. Silt's store keeps user names as text: one
// that is not UTF-8 without NUL is UNACCEPTABLE_CREDENTIAL.
//
// The valid changes are one transaction. Results come as Kafka groups them: deletions done,
// upsertions done, then errors (Kafka orders each group by its hash maps; Silt by request).
// Runs on the blocking pool.
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <openssl/crypto.h>

#include "base/log.h"
#include "base/utf8.h"
#include "handlers/admin_util.h"
#include "handlers/handlers.h"

namespace silt::handlers {

namespace {

using admin::api_error;
using protocol::alter_user_scram_credentials_request;
using protocol::alter_user_scram_credentials_response;
using protocol::error_code;

// Kafka's ScramControlManager.validateScramUsernameAndMechanism.
api_error check_user_and_mechanism(const std::string& user, int8_t mechanism) {
  if (user.empty()) return {error_code::unacceptable_credential, "Username must not be empty"};
  if (!base::is_storable_text(user)) {
    return {error_code::unacceptable_credential,
            "Username must be UTF-8 text without NUL characters"};
  }
  if (!security::scram_algorithm_of_type(mechanism)) {
    return {error_code::unsupported_sasl_mechanism, "Unknown SCRAM mechanism"};
  }
  return {};
}

// Users in the order the request first names them, with the error each ends with.
class outcome {
 public:
  void name(const std::string& user) {
    if (seen_.emplace(user, order_.size()).second) order_.push_back(user);
  }
  [[nodiscard]] bool failed(const std::string& user) const { return errors_.contains(user); }
  void fail(const std::string& user, api_error e) { errors_.emplace(user, std::move(e)); }
  [[nodiscard]] const std::vector<std::string>& order() const { return order_; }
  [[nodiscard]] const api_error* error_of(const std::string& user) const {
    auto it = errors_.find(user);
    return it == errors_.end() ? nullptr : &it->second;
  }

 private:
  std::map<std::string, size_t> seen_;
  std::vector<std::string> order_;
  std::map<std::string, api_error> errors_;
};

}  // namespace

asio::awaitable<alter_user_scram_credentials_response> handle_alter_user_scram_credentials(
    context& ctx, const net::request& /*raw*/, const alter_user_scram_credentials_request& req) {
  // Authorization goes here with ACLs: Kafka needs ALTER on CLUSTER, else every user's result is
  // CLUSTER_AUTHORIZATION_FAILED.
  auto& store = ctx.credentials();
  // Deletions are checked against what exists: take in what other brokers changed first.
  if (auto r = store.refresh(); !r) {
    SILT_LOG(warn, "silt: cannot read the changes of SCRAM credentials");
  }
  using deletion = alter_user_scram_credentials_request::ScramCredentialDeletion;
  using upsertion = alter_user_scram_credentials_request::ScramCredentialUpsertion;
  outcome users;
  std::map<std::string, const deletion*> deletions;
  std::map<std::string, const upsertion*> upsertions;
  const api_error duplicate{error_code::duplicate_resource,
                            "A user credential cannot be altered twice in the same request"};
  for (const auto& d : req.deletions) {
    users.name(d.name);
    if (users.failed(d.name)) continue;
    if (deletions.erase(d.name) != 0) {
      users.fail(d.name, duplicate);
      continue;
    }
    auto e = check_user_and_mechanism(d.name, d.mechanism);
    if (e.ok() && !store.has(d.name, *security::scram_algorithm_of_type(d.mechanism))) {
      e = {error_code::resource_not_found,
           "Attempt to delete a user credential that does not exist"};
    }
    if (!e.ok()) {
      users.fail(d.name, std::move(e));
    } else {
      deletions.emplace(d.name, &d);
    }
  }
  for (const auto& u : req.upsertions) {
    users.name(u.name);
    if (users.failed(u.name)) continue;
    if (deletions.erase(u.name) + upsertions.erase(u.name) != 0) {
      users.fail(u.name, duplicate);
      continue;
    }
    auto e = check_user_and_mechanism(u.name, u.mechanism);
    if (e.ok() && u.iterations < security::scram_min_iterations) {
      e = {error_code::unacceptable_credential, "Too few iterations"};
    } else if (e.ok() && u.iterations > security::scram_max_iterations) {
      e = {error_code::unacceptable_credential, "Too many iterations"};
    }
    if (!e.ok()) {
      users.fail(u.name, std::move(e));
    } else {
      upsertions.emplace(u.name, &u);
    }
  }

  // The changes, deletions first, each user once.
  std::vector<metadata::credential_change> changes;
  std::vector<std::string> changed;  // the user of each change
  for (const auto& user : users.order()) {
    auto it = deletions.find(user);
    if (it == deletions.end()) continue;
    changes.push_back({user, *security::scram_algorithm_of_type(it->second->mechanism), {}});
    changed.push_back(user);
  }
  for (const auto& user : users.order()) {
    auto it = upsertions.find(user);
    if (it == upsertions.end()) continue;
    const auto& u = *it->second;
    if (u.salted_password.empty()) {
      users.fail(user, {static_cast<int16_t>(error_code::unknown_server_error), std::nullopt});
      continue;
    }
    const auto a = *security::scram_algorithm_of_type(u.mechanism);
    auto c = security::scram_credential_from_salted(a, u.salt, u.salted_password, u.iterations);
    if (c.stored_key.size() != security::scram_hash_size(a) ||
        c.server_key.size() != security::scram_hash_size(a)) {
      users.fail(user, {error_code::unknown_server_error, "Cannot compute the SCRAM credential"});
      continue;
    }
    changes.push_back({user, a, std::move(c)});
    changed.push_back(user);
  }

  std::vector<bool> applied;
  if (!changes.empty()) {
    auto r = store.alter(changes);
    if (r) {
      applied = std::move(*r);
    } else {
      for (const auto& user : changed) {
        users.fail(user, {error_code::unknown_server_error, "Cannot store the SCRAM credentials"});
      }
    }
    for (auto& c : changes) {
      if (!c.credential) continue;
      OPENSSL_cleanse(c.credential->stored_key.data(), c.credential->stored_key.size());
      OPENSSL_cleanse(c.credential->server_key.data(), c.credential->server_key.size());
    }
  }

  alter_user_scram_credentials_response resp;
  auto result = [&](const std::string& user, const api_error& e) {
    resp.results.push_back({user, e.code, e.ok() ? std::nullopt : e.message, {}});
  };
  // Deleted meanwhile through another broker: as if it never existed.
  for (size_t i = 0; i < applied.size(); ++i) {
    if (!applied[i]) {
      users.fail(changed[i], {error_code::resource_not_found,
                              "Attempt to delete a user credential that does not exist"});
    }
  }
  for (const auto& user : changed) {
    if (!users.failed(user)) result(user, {});
  }
  for (const auto& user : users.order()) {
    if (const api_error* e = users.error_of(user)) result(user, *e);
  }
  co_return resp;
}

}  // namespace silt::handlers
