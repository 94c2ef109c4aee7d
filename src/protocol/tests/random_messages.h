// Random message values for the round-trip tests of the generated codecs.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "protocol/reader.h"
#include "protocol/types.h"
#include "protocol/writer.h"

namespace silt::protocol::testing {

// A seeded source of random field values. Record data it hands out lives as long as it does.
class random_source {
 public:
  explicit random_source(uint64_t seed) : rng_(seed) {}

  bool chance(int one_in) { return std::uniform_int_distribution<int>(0, one_in - 1)(rng_) == 0; }
  size_t count() { return std::uniform_int_distribution<size_t>(0, 3)(rng_); }

  template <typename T>
  T integer() {
    // Mix edge values with uniform ones: varint and sign handling live at the edges.
    switch (std::uniform_int_distribution<int>(0, 5)(rng_)) {
      case 0:
        return std::numeric_limits<T>::min();
      case 1:
        return std::numeric_limits<T>::max();
      case 2:
        return T{0};
      case 3:
        return static_cast<T>(-1);
      default:
        return static_cast<T>(std::uniform_int_distribution<int64_t>(
            std::numeric_limits<T>::min(), std::numeric_limits<T>::max())(rng_));
    }
  }
  double real() { return std::uniform_real_distribution<double>(-1e9, 1e9)(rng_); }
  uuid any_uuid() {
    uuid u;
    for (auto& b : u.bytes) b = static_cast<uint8_t>(rng_());
    return u;
  }
  std::string text() {
    std::string s(std::uniform_int_distribution<size_t>(0, 12)(rng_), ' ');
    for (auto& c : s) c = static_cast<char>(std::uniform_int_distribution<int>(32, 126)(rng_));
    return s;
  }
  std::vector<uint8_t> blob() {
    std::vector<uint8_t> b(std::uniform_int_distribution<size_t>(0, 40)(rng_));
    for (auto& x : b) x = static_cast<uint8_t>(rng_());
    return b;
  }
  records_view records() {
    storage_.push_back(blob());
    return records_view(storage_.back());
  }
  // Adds unknown tagged fields (tags above any the specs use), in ascending tag order, at
  // times ending with the largest tag there is.
  void unknown_tags(std::vector<tagged_field>& out) {
    uint32_t tag = 1000;
    for (size_t i = count(); i > 0; --i) {
      tag += std::uniform_int_distribution<uint32_t>(1, 100000)(rng_);
      out.push_back({tag, blob()});
    }
    if (chance(4)) out.push_back({UINT32_MAX, blob()});
  }

 private:
  std::mt19937_64 rng_;
  std::deque<std::vector<uint8_t>> storage_;
};

struct round_trip_result {
  bool ok = false;
  std::string detail;  // what went wrong, when !ok
};

// One message type at one version.
struct message_case {
  std::string name;
  bool is_request;
  int16_t version;
  std::function<round_trip_result(random_source&, int16_t)> run;
};

// Every generated message at every valid version (generated in random_messages.cc).
std::vector<message_case> all_message_cases();

// Encodes m, checks encoded_size, decodes, and checks that encoding again gives equal bytes.
template <typename Msg>
round_trip_result check_round_trip(const Msg& m, int16_t version) {
  writer w(m.encoded_size(version));
  m.encode(w, version);
  if (!w.ok()) return {false, "encode failed: " + std::string(encode_error_name(w.error()))};
  const std::vector<uint8_t> first = w.take();
  if (first.size() != m.encoded_size(version)) {
    return {false, "encoded_size " + std::to_string(m.encoded_size(version)) +
                       " but encode wrote " + std::to_string(first.size())};
  }
  reader r(first);
  Msg decoded;
  decoded.decode(r, version);
  r.expect_end();
  if (!r.ok()) return {false, "decode failed: " + std::string(decode_error_name(r.error()))};
  writer w2;
  decoded.encode(w2, version);
  if (!w2.ok()) return {false, "re-encode failed"};
  if (w2.take() != first) return {false, "re-encoded bytes differ"};
  // Decoding the re-encoded form gives an equal object.
  reader r2(first);
  Msg again;
  again.decode(r2, version);
  if (!(again == decoded)) return {false, "decoded objects differ"};
  return {true, {}};
}

}  // namespace silt::protocol::testing
