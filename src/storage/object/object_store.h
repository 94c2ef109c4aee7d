// The object store interface: whole-object writes, ranged reads, deletes and listings, over a
// local directory (the embedded default), S3, and Azure Blob.
//
// Calls block until done (retrying transient failures inside, per the store's retry policy)
// and are safe to make from several threads at once. Callers keep them off latency-sensitive
// threads: uploads and compaction run on their own threads, cold reads on a reader pool.
// Implementations: local_store.h (file://), s3_store.h (s3://), azure_store.h (azblob://);
// decorators: metered_store.h (metrics), faulty_store.h (injected failures, for tests).
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <tl/expected.hpp>

namespace silt::storage {

enum class store_error : uint8_t {
  not_found,         // no object under that key (get, head), or no such bucket (any call)
  invalid_range,     // a get whose offset lies past the object's end
  access_denied,     // bad credentials or signature, or no permission (S3 403)
  throttled,         // still throttled after the retries (S3 503 SlowDown, 429)
  timeout,           // still timing out after the retries
  io,                // any other failure: network, disk, server error after retries
  invalid_argument,  // a key or URI the store cannot use
  already_exists,    // put_if_absent: another object is under that key
};

[[nodiscard]] std::string_view store_error_name(store_error e);

struct object_info {
  std::string key;
  uint64_t size = 0;
  bool operator==(const object_info&) const = default;
};

// A length that reads to the object's end.
inline constexpr uint64_t to_end = std::numeric_limits<uint64_t>::max();

// Bytes read from a store, kept alive by `owner`: the store chose the memory (the local store
// reads with O_DIRECT into an aligned buffer a little larger than the range).
struct shared_bytes {
  std::shared_ptr<const void> owner;
  std::span<const uint8_t> bytes;
};

class object_store {
 public:
  virtual ~object_store() = default;

  // Writes `data` under `key`, replacing any object there. Atomic: a reader sees the whole
  // old object or the whole new one, never a part; durable once this returns. On failure the
  // object may or may not have been written (a lost reply): callers retry with the same data.
  [[nodiscard]] virtual tl::expected<void, store_error> put(std::string_view key,
                                                            std::span<const uint8_t> data) = 0;
  // The same with the object's bytes given as a gather list: `parts`, concatenated (empty
  // parts allowed). The parts are only read during the call. The default concatenates them and
  // calls put(); the local store writes them without that copy.
  [[nodiscard]] virtual tl::expected<void, store_error> put_parts(
      std::string_view key, std::span<const std::span<const uint8_t>> parts);
  // Writes `data` under `key` only if no object is there; already_exists when one is. Of
  // writers racing for one key, exactly one succeeds. A retried request whose first attempt
  // did write (its reply lost) finds an object: the store then compares it with `data` and
  // succeeds when they are the same bytes.
  [[nodiscard]] virtual tl::expected<void, store_error> put_if_absent(
      std::string_view key, std::span<const uint8_t> data) = 0;
  // Reads `length` bytes from `offset`; fewer when the object ends first (none when `offset`
  // is its size); invalid_range when `offset` lies past its end. `to_end` reads the rest.
  // Stores check their transfers, but a caller that knows the size should still compare: a
  // short result is how a truncated read shows (faulty_store injects exactly that).
  [[nodiscard]] virtual tl::expected<std::vector<uint8_t>, store_error> get(std::string_view key,
                                                                            uint64_t offset,
                                                                            uint64_t length) = 0;
  // get() for a caller that keeps the bytes shared (the block cache): the same results, in
  // memory the store may read into directly. The default moves get()'s vector into the owner.
  [[nodiscard]] virtual tl::expected<shared_bytes, store_error> get_shared(std::string_view key,
                                                                           uint64_t offset,
                                                                           uint64_t length);
  // The object's size.
  [[nodiscard]] virtual tl::expected<uint64_t, store_error> head(std::string_view key) = 0;
  // Deletes `key`; succeeds when there was no such object.
  [[nodiscard]] virtual tl::expected<void, store_error> remove(std::string_view key) = 0;
  // Every object whose key starts with `prefix`, in key order (bytewise, as S3 lists).
  [[nodiscard]] virtual tl::expected<std::vector<object_info>, store_error> list(
      std::string_view prefix) = 0;
  // A short description for logs (e.g. "file:///data/objects", "s3://bucket at host:port"),
  // without credentials.
  [[nodiscard]] virtual std::string describe() const = 0;
  // Shutdown: calls in progress give up as soon as they can (transfers aborted, no more
  // retries) and later calls fail at once, so that nothing waits on an unreachable store.
  // Irreversible. The default does nothing (stores whose calls never hang).
  virtual void cancel() {}

 protected:
  // For put_if_absent when the store says the key is taken: success when the object there
  // holds exactly `data` (an earlier attempt of the same call wrote it), else already_exists.
  [[nodiscard]] tl::expected<void, store_error> taken_by(std::string_view key,
                                                         std::span<const uint8_t> data);
};

// Opens the store a URI names:
//   file:///abs/path or file://relative/path   a local directory (created if missing)
//   s3://bucket?endpoint=http://host:port&region=us-east-1&path_style=true
//      credentials from access_key/secret_key parameters or AWS_ACCESS_KEY_ID /
//      AWS_SECRET_ACCESS_KEY; see s3_store.h (parse_s3_uri) for every parameter.
//   azblob://container?account=NAME&endpoint=URL&key=BASE64 (or sas=TOKEN)
//      see azure_store.h (parse_azure_uri) for every parameter.
// The HTTP stores log each failed attempt (rate-limited, base/log.h). The error names the
// part of the URI that is wrong. Neither quotes a credential of the URI: they are masked
// (base/redact.h), in the request URLs of the log lines too; describe() shows none.
[[nodiscard]] tl::expected<std::unique_ptr<object_store>, std::string> open_object_store(
    std::string_view uri);

}  // namespace silt::storage
