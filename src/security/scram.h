// SCRAM (RFC 5802, RFC 7677) on the broker's side, as Kafka's SCRAM-SHA-256 and SCRAM-SHA-512:
// the stored form of a password (scram_credential), the formulas that make it, where the broker
// looks credentials up (scram_credential_source) and the mechanism the listeners enable
// (scram_mechanism).
//
// An exchange is three messages (RFC 5802 section 5):
//   client-first  gs2-header n=user,r=cnonce[,extensions]     gs2-header: "n,," "y,," "n,a=user,"
//   server-first  r=cnonce+snonce,s=base64(salt),i=iterations
//   client-final  c=base64(gs2-header),r=cnonce+snonce[,extensions],p=base64(ClientProof)
//   server-final  v=base64(ServerSignature)
// The broker keeps no password: only StoredKey and ServerKey, from which it checks the proof
// and signs its answer. An unknown user goes through the same steps with a made-up credential
// and fails at the same step with the same message as a wrong password.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "security/sasl.h"

namespace silt::security {

// The hash function of a SCRAM mechanism.
enum class scram_algorithm : uint8_t { sha256, sha512 };

// "SCRAM-SHA-256" or "SCRAM-SHA-512".
[[nodiscard]] std::string_view scram_mechanism_name(scram_algorithm a);
// The algorithm of a mechanism name, none for another name.
[[nodiscard]] std::optional<scram_algorithm> scram_algorithm_of(std::string_view mechanism);
// Kafka's number of a mechanism in its admin APIs (org.apache.kafka.clients.admin.ScramMechanism:
// 1 SCRAM-SHA-256, 2 SCRAM-SHA-512; 0 is UNKNOWN) and back (none for any other number).
[[nodiscard]] int8_t scram_mechanism_type(scram_algorithm a);
[[nodiscard]] std::optional<scram_algorithm> scram_algorithm_of_type(int8_t type);
// The digest size of the algorithm's hash: 32 or 64 bytes.
[[nodiscard]] size_t scram_hash_size(scram_algorithm a);

// The iterations Kafka accepts for a credential (ScramMechanism.minIterations(),
// ScramControlManager.MAX_ITERATIONS) and the one its tools use when none is given.
inline constexpr int32_t scram_min_iterations = 4096;
inline constexpr int32_t scram_max_iterations = 16384;
inline constexpr int32_t scram_default_iterations = 4096;

// A user's password as the broker stores it for one mechanism (RFC 5802's "authentication
// information"): the salt and iteration count clients salt the password with, StoredKey
// (H(ClientKey)), which checks a client's proof, and ServerKey, which signs the server's answer.
struct scram_credential {
  std::vector<uint8_t> salt;
  std::vector<uint8_t> stored_key;
  std::vector<uint8_t> server_key;
  int32_t iterations = 0;
  bool operator==(const scram_credential&) const = default;
};

// RFC 5802's functions over the algorithm's hash (OpenSSL). Each returns an empty result when
// OpenSSL fails (out of memory); callers check the size.
// H(data).
[[nodiscard]] std::vector<uint8_t> scram_hash(scram_algorithm a, std::span<const uint8_t> data);
// HMAC(key, data).
[[nodiscard]] std::vector<uint8_t> scram_hmac(scram_algorithm a, std::span<const uint8_t> key,
                                              std::span<const uint8_t> data);
// SaltedPassword = Hi(password, salt, iterations), which is PBKDF2 (RFC 8018) with HMAC and an
// output of one hash's size. Costs `iterations` HMACs: not for a network thread.
[[nodiscard]] std::vector<uint8_t> scram_salted_password(scram_algorithm a,
                                                         std::string_view password,
                                                         std::span<const uint8_t> salt,
                                                         int32_t iterations);
// The stored credential from a salted password: StoredKey = H(HMAC(SaltedPassword, "Client
// Key")), ServerKey = HMAC(SaltedPassword, "Server Key"). What AlterUserScramCredentials does
// with the salted password a client sends (the password never reaches the broker).
[[nodiscard]] scram_credential scram_credential_from_salted(
    scram_algorithm a, std::span<const uint8_t> salt, std::span<const uint8_t> salted_password,
    int32_t iterations);
// The same from the password itself.
[[nodiscard]] scram_credential make_scram_credential(scram_algorithm a, std::string_view password,
                                                     std::span<const uint8_t> salt,
                                                     int32_t iterations);

// Where the mechanism finds a user's credential. Looked up from memory on a network thread
// during an exchange: an implementation must be thread-safe and must never wait on a disk,
// a database or the network (metadata::credential_store keeps a snapshot).
class scram_credential_source {
 public:
  virtual ~scram_credential_source() = default;
  scram_credential_source() = default;
  scram_credential_source(const scram_credential_source&) = delete;
  scram_credential_source& operator=(const scram_credential_source&) = delete;
  // The user's credential for the mechanism, none when it has none.
  [[nodiscard]] virtual std::optional<scram_credential> find(std::string_view user,
                                                             scram_algorithm a) const = 0;
};

// Test seams of the mechanism.
struct scram_options {
  // Makes the server's part of the nonce (printable, no ','); empty: 32 characters of
  // base64 from RAND_bytes. Tests fix it to replay RFC 7677's example.
  std::function<std::string()> server_nonce;
};

// Bounds on what a client may send: a longer message fails before it is parsed.
inline constexpr size_t scram_max_message_bytes = 8192;

// SCRAM-SHA-256 or SCRAM-SHA-512 as Kafka's ScramSaslServer runs it, for one listener; shared
// by its connections (thread-safe: it holds only constants). `source` must outlive it and
// every exchange it started. The principal of a success is the user name (Kafka's User
// principal); delegation tokens (the `tokenauth` extension) are refused, channel binding
// (gs2 flag 'p') too. Other extensions are ignored, as Kafka does.
class scram_mechanism final : public sasl_mechanism {
 public:
  scram_mechanism(scram_algorithm a, const scram_credential_source& source,
                  scram_options options = {});
  ~scram_mechanism() override;

  [[nodiscard]] std::string_view name() const override { return scram_mechanism_name(algorithm_); }
  [[nodiscard]] std::unique_ptr<sasl_exchange> start() const override;

  // What an unknown user is answered with: a salt made from the user name with a key drawn
  // at random once per process (the same for every attempt and every listener, as a real
  // user's salt is), shaped as the salts of Kafka's tools (26 characters of base 36), Kafka's
  // default iterations, and keys no proof matches.
  [[nodiscard]] scram_credential made_up_credential(std::string_view user) const;

 private:
  class exchange;

  scram_algorithm algorithm_;
  const scram_credential_source& source_;
  scram_options options_;
};

}  // namespace silt::security
