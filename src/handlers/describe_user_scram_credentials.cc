// DescribeUserScramCredentials (key 50, v0): the SCRAM mechanisms and iterations of users, as
// Kafka 4.1's brokers answer it (ScramImage.describe): no users (null or empty) describes every
// user that has a credential; a user named twice gets DUPLICATE_RESOURCE, once; a user without
// credentials RESOURCE_NOT_FOUND. A user's mechanisms come SCRAM-SHA-256 first. Kafka lists
// users in its hash map's order, Silt by name. Answered from this broker's snapshot of the
// credential store (refreshed every tenth of a second), as Kafka's brokers answer from their
// metadata image: memory only, on the network thread.
#include <map>

#include "handlers/handlers.h"

namespace silt::handlers {

namespace {

using protocol::describe_user_scram_credentials_response;
using protocol::error_code;

}  // namespace

asio::awaitable<describe_user_scram_credentials_response> handle_describe_user_scram_credentials(
    context& ctx, const net::request& /*raw*/,
    const protocol::describe_user_scram_credentials_request& req) {
  // Authorization goes here with ACLs: Kafka needs DESCRIBE on CLUSTER, else the whole response
  // is CLUSTER_AUTHORIZATION_FAILED.
  const auto& store = ctx.credentials();
  // Each user named, and whether it was named more than once.
  std::map<std::string, bool> users;
  const bool all = !req.users || req.users->empty();
  if (all) {
    for (auto& u : store.users()) users.emplace(std::move(u), false);
  } else {
    for (const auto& u : *req.users) {
      auto [it, fresh] = users.emplace(u.name, false);
      if (!fresh) it->second = true;
    }
  }
  describe_user_scram_credentials_response resp;
  resp.results.reserve(users.size());
  for (const auto& [user, twice] : users) {
    const auto infos = twice ? std::vector<metadata::credential_info>() : store.describe(user);
    if (!twice && infos.empty() && all) continue;  // deleted since it was listed
    auto& out = resp.results.emplace_back();
    out.user = user;
    if (twice) {
      out.error_code = static_cast<int16_t>(error_code::duplicate_resource);
      out.error_message =
          "Cannot describe SCRAM credentials for the same user twice in a single request: " + user;
    } else if (infos.empty()) {
      out.error_code = static_cast<int16_t>(error_code::resource_not_found);
      out.error_message = "Attempt to describe a user credential that does not exist: " + user;
    }
    for (const auto& i : infos) {
      out.credential_infos.push_back(
          {security::scram_mechanism_type(i.mechanism), i.iterations, {}});
    }
  }
  co_return resp;
}

}  // namespace silt::handlers
