#include "payloads.h"

#include <fstream>
#include <iterator>
#include <random>

namespace silt::perf {

namespace {

constexpr size_t keys_in_set = 10000;
constexpr size_t key_bytes = 7;  // base64url: 10 characters, as OMB's and AutoMQ's keys

std::string base64url(const unsigned char* p, size_t n) {
  static constexpr char alphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  std::string out;
  uint32_t acc = 0;
  int bits = 0;
  for (size_t i = 0; i < n; ++i) {
    acc = (acc << 8) | p[i];
    bits += 8;
    while (bits >= 6) {
      bits -= 6;
      out += alphabet[(acc >> bits) & 63];
    }
  }
  if (bits > 0) out += alphabet[(acc << (6 - bits)) & 63];
  return out;
}

}  // namespace

std::array<unsigned char, record_header_size> encode_record_header(uint64_t run_id,
                                                                   int64_t due_us) {
  std::array<unsigned char, record_header_size> h{};
  const auto due = static_cast<uint64_t>(due_us);
  for (size_t i = 0; i < 8; ++i) {
    h[i] = static_cast<unsigned char>(run_id >> (56 - 8 * i));
    h[8 + i] = static_cast<unsigned char>(due >> (56 - 8 * i));
  }
  return h;
}

std::optional<record_header> decode_record_header(const void* data, size_t size) {
  if (data == nullptr || size != record_header_size) return std::nullopt;
  const auto* p = static_cast<const unsigned char*>(data);
  uint64_t id = 0;
  uint64_t due = 0;
  for (size_t i = 0; i < 8; ++i) {
    id = (id << 8) | p[i];
    due = (due << 8) | p[8 + i];
  }
  return record_header{id, static_cast<int64_t>(due)};
}

tl::expected<payload_pool, std::string> payload_pool::build(const workload& w,
                                                            std::vector<std::string>& notes) {
  payload_pool pool;
  std::mt19937_64 rng(std::random_device{}());
  auto random_bytes = [&](std::string& s, size_t from, size_t to) {
    for (size_t i = from; i < to; ++i) s[i] = static_cast<char>(rng() & 0xff);
  };

  if (!w.payload_file.empty()) {
    std::ifstream in(w.payload_file, std::ios::binary);
    if (!in) return tl::make_unexpected("cannot read the payload file " + w.payload_file);
    std::string content((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (content.empty())
      return tl::make_unexpected("the payload file " + w.payload_file + " is empty");
    if (content.size() != static_cast<size_t>(w.record_size)) {
      notes.push_back("the payload file " + w.payload_file + " holds " +
                      std::to_string(content.size()) + " bytes, not the record size " +
                      std::to_string(w.record_size) + ": records carry the file as it is");
    }
    pool.values_.push_back(std::move(content));
  } else {
    const auto size = static_cast<size_t>(w.record_size);
    const auto random = static_cast<size_t>(static_cast<double>(size) * w.random_ratio);
    std::string rest(size, '\0');
    if (w.fill == payload_fill::repeated_block) random_bytes(rest, random, size);
    const int count = random == 0 ? 1 : w.random_pool_size;
    pool.values_.reserve(static_cast<size_t>(count));
    for (int i = 0; i < count; ++i) {
      std::string v = rest;
      random_bytes(v, 0, random);
      pool.values_.push_back(std::move(v));
    }
  }

  if (w.keys != key_distributor::no_key) {
    pool.keys_.reserve(keys_in_set);
    unsigned char raw[key_bytes];
    for (size_t i = 0; i < keys_in_set; ++i) {
      for (auto& b : raw) b = static_cast<unsigned char>(rng() & 0xff);
      pool.keys_.push_back(base64url(raw, key_bytes));
    }
  } else {
    pool.keys_.emplace_back();
  }
  return pool;
}

}  // namespace silt::perf
