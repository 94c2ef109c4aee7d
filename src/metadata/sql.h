// The SQL layer under the metadata store: one interface, two databases. SQLite is the
// embedded default (one file, WAL journal, synchronous=FULL); PostgreSQL (libpq) is the
// shared store of a cluster. The tables and their logic are written once, in the subset of
// SQL both speak; statements use `?` placeholders (the PostgreSQL driver numbers them).
//
// Every call blocks on the database (an fsync, a network round trip): callers run on the
// blocking pool or a background thread, never on a network thread (see mark_network_thread()).
//
// A connection is used by one thread at a time (its owner holds a mutex around it); a
// database hands out connections and runs the schema migrations once when it opens.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <tl/expected.hpp>

namespace silt::metadata::sql {

enum class dialect : uint8_t { sqlite, postgresql };

// Bytes bound or read as a BLOB (SQLite) / BYTEA (PostgreSQL).
struct bytes_view {
  std::span<const uint8_t> data;
};

// A statement parameter.
using param = std::variant<std::nullptr_t, int64_t, std::string_view, bytes_view>;

struct value {
  enum class type : uint8_t { null, integer, text, blob } kind = type::null;
  int64_t integer = 0;
  std::string text;  // text, or the bytes of a blob
};

class row {
 public:
  explicit row(std::vector<value> values) : values_(std::move(values)) {}
  [[nodiscard]] bool is_null(size_t col) const { return values_.at(col).kind == value::type::null; }
  [[nodiscard]] int64_t integer(size_t col) const;
  [[nodiscard]] const std::string& text(size_t col) const { return values_.at(col).text; }
  [[nodiscard]] std::vector<uint8_t> blob(size_t col) const;
  [[nodiscard]] size_t size() const { return values_.size(); }

 private:
  std::vector<value> values_;
};

struct result {
  std::vector<row> rows;
  int64_t changes = 0;  // rows inserted, updated or deleted
};

class connection {
 public:
  virtual ~connection() = default;
  connection() = default;
  connection(const connection&) = delete;
  connection& operator=(const connection&) = delete;

  // Runs one statement with `?` placeholders. The error is a message (also logged).
  [[nodiscard]] virtual tl::expected<result, std::string> run(std::string_view sql,
                                                              std::span<const param> params) = 0;
  // Runs statements separated by `;`, without parameters.
  [[nodiscard]] virtual tl::expected<void, std::string> script(std::string_view sql) = 0;
  // BEGIN for a transaction that will write (SQLite takes the write lock at once).
  [[nodiscard]] virtual tl::expected<void, std::string> begin() = 0;
  [[nodiscard]] virtual dialect kind() const = 0;

  // Set by `transaction` while one is open on this connection.
  bool in_transaction = false;

  template <typename... P>
  [[nodiscard]] tl::expected<result, std::string> query(std::string_view sql, const P&... p) {
    const param params[] = {param(p)..., param(nullptr)};
    return run(sql, std::span<const param>(params, sizeof...(P)));
  }
};

// Rolls back unless committed.
class transaction {
 public:
  explicit transaction(connection& c) : c_(c) {
    ok_ = c_.begin().has_value();
    c_.in_transaction = ok_;
  }
  ~transaction();
  transaction(const transaction&) = delete;
  transaction& operator=(const transaction&) = delete;
  [[nodiscard]] bool ok() const { return ok_; }
  [[nodiscard]] bool commit();

 private:
  connection& c_;
  bool ok_ = false;
  bool done_ = false;
};

class database {
 public:
  virtual ~database() = default;
  database() = default;
  database(const database&) = delete;
  database& operator=(const database&) = delete;

  // A new connection to the same database.
  [[nodiscard]] virtual tl::expected<std::unique_ptr<connection>, std::string> connect() = 0;
  [[nodiscard]] virtual dialect kind() const = 0;
  // The URI with its credentials masked (base::redact_uri), for messages.
  [[nodiscard]] virtual std::string describe() const = 0;
};

// The schema version this build writes; open_database() migrates older schemas to it and
// refuses newer ones.
inline constexpr int64_t schema_version = 13;

// Opens `uri` (sqlite:///path/file.db, sqlite://:memory: for a private in-memory database,
// or postgresql://user:password@host:port/dbname; a bare path is an SQLite file), creating
// or migrating the schema. The error quotes no credential of `uri` (base::redact_secrets).
[[nodiscard]] tl::expected<std::shared_ptr<database>, std::string> open_database(
    const std::string& uri);

// An SQL expression for the database server's clock in milliseconds since the Unix epoch.
// Leases are kept in this clock, so that brokers need not agree on theirs.
[[nodiscard]] std::string_view now_ms_expression(dialect d);

// The schema version stored in a database (0 before the first migration).
[[nodiscard]] tl::expected<int64_t, std::string> stored_schema_version(connection& c);

// Transactions committed through the metadata store since start: each `transaction` that
// committed, and each write statement run outside one (its own transaction).
[[nodiscard]] uint64_t committed_transactions();
// Statements sent to the metadata store since start (BEGIN and COMMIT included): on
// PostgreSQL, each is a round trip to the server.
[[nodiscard]] uint64_t statements_sent();

// Memory SQLite holds (its page caches, of up to 2 MiB per connection, and its statements),
// over every SQLite metadata store of the process; 0 without one.
[[nodiscard]] uint64_t sqlite_memory_bytes();

// Network threads mark themselves; the metadata store refuses to run a statement on one
// (and counts the attempt), so that a slow database can never stall a connection's thread.
void mark_network_thread(bool network);
// Statements attempted on a network thread since start (each also logged).
[[nodiscard]] uint64_t network_thread_violations();

}  // namespace silt::metadata::sql
