// SASL/PLAIN (RFC 4616) against the users of Kafka's PlainLoginModule: each option
// user_<name>="<password>" of the listener's sasl.jaas.config is a user. The client's one
// message is [authzid] NUL authcid NUL passwd; an authorization id, if any, must be the user
// name. Passwords are compared in constant time; an unknown user, a wrong password and a
// malformed message get the same answer.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "security/sasl.h"

namespace silt::security {

class plain_mechanism final : public sasl_mechanism {
 public:
  // `users`: name -> password.
  explicit plain_mechanism(std::map<std::string, std::string> users);
  // The users of a PlainLoginModule entry's options (user_<name>).
  [[nodiscard]] static std::map<std::string, std::string> users_of(
      const std::map<std::string, std::string>& jaas_options);

  [[nodiscard]] std::string_view name() const override { return "PLAIN"; }
  [[nodiscard]] std::unique_ptr<sasl_exchange> start() const override;
  // Whether `password` is `user`'s.
  [[nodiscard]] bool check(std::string_view user, std::string_view password) const;

 private:
  std::map<std::string, std::string, std::less<>> users_;
};

}  // namespace silt::security
