#include "security/sasl.h"

namespace silt::security {

std::string invalid_credentials_message(std::string_view mechanism) {
  return "Authentication failed during authentication due to invalid credentials with SASL "
         "mechanism " +
         std::string(mechanism);
}

}  // namespace silt::security
