// SQLite driver: one file in WAL journal mode with synchronous=FULL, so that a commit is
// durable when it returns. Each connection keeps its prepared statements.
#include <atomic>
#include <cstdio>
#include <map>

#include <sqlite3.h>

#include "base/log.h"
#include "metadata/sql_drivers.h"

namespace silt::metadata::sql {

namespace {

std::string unexpected_message(sqlite3* db, std::string_view what) {
  std::string msg = std::string(what) + ": " + sqlite3_errmsg(db);
  SILT_LOG(info, "metadata (sqlite): %s", msg.c_str());
  return msg;
}

class sqlite_connection final : public connection {
 public:
  explicit sqlite_connection(sqlite3* db) : db_(db) {}
  ~sqlite_connection() override {
    for (auto& [sql, stmt] : cache_) sqlite3_finalize(stmt);
    sqlite3_close(db_);
  }

  tl::expected<result, std::string> run(std::string_view sql,
                                        std::span<const param> params) override {
    if (refuse_on_network_thread(sql)) {
      return tl::make_unexpected(std::string("metadata statement on a network thread"));
    }
    sqlite3_stmt* stmt = prepare(sql);
    if (stmt == nullptr) return tl::make_unexpected(unexpected_message(db_, sql));
    struct reset_guard {
      sqlite3_stmt* s;
      ~reset_guard() {
        sqlite3_reset(s);
        sqlite3_clear_bindings(s);
      }
    } guard{stmt};
    int i = 1;
    for (const param& p : params) {
      if (std::holds_alternative<int64_t>(p)) {
        sqlite3_bind_int64(stmt, i, std::get<int64_t>(p));
      } else if (std::holds_alternative<std::string_view>(p)) {
        // An empty view may have no data pointer, which SQLite would bind as NULL.
        const auto s = std::get<std::string_view>(p);
        sqlite3_bind_text(stmt, i, s.empty() ? "" : s.data(), static_cast<int>(s.size()),
                          SQLITE_TRANSIENT);
      } else if (std::holds_alternative<bytes_view>(p)) {
        const auto b = std::get<bytes_view>(p).data;
        if (b.empty()) {
          sqlite3_bind_zeroblob(stmt, i, 0);  // not NULL: an empty vector has no data pointer
        } else {
          sqlite3_bind_blob(stmt, i, b.data(), static_cast<int>(b.size()), SQLITE_TRANSIENT);
        }
      } else {
        sqlite3_bind_null(stmt, i);
      }
      ++i;
    }
    result out;
    int rc;
    while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
      const int n = sqlite3_column_count(stmt);
      std::vector<value> values(static_cast<size_t>(n));
      for (int c = 0; c < n; ++c) {
        value& v = values[static_cast<size_t>(c)];
        switch (sqlite3_column_type(stmt, c)) {
          case SQLITE_INTEGER:
          case SQLITE_FLOAT:
            v.kind = value::type::integer;
            v.integer = sqlite3_column_int64(stmt, c);
            break;
          case SQLITE_TEXT:
          case SQLITE_BLOB: {
            v.kind =
                sqlite3_column_type(stmt, c) == SQLITE_TEXT ? value::type::text : value::type::blob;
            const auto* p = static_cast<const char*>(sqlite3_column_blob(stmt, c));
            const int len = sqlite3_column_bytes(stmt, c);
            if (p != nullptr) v.text.assign(p, static_cast<size_t>(len));
            break;
          }
          default:
            break;
        }
      }
      out.rows.emplace_back(std::move(values));
    }
    if (rc != SQLITE_DONE) return tl::make_unexpected(unexpected_message(db_, sql));
    out.changes = sqlite3_changes64(db_);
    count_statement(*this, sql);
    return out;
  }

  tl::expected<void, std::string> script(std::string_view sql) override {
    if (refuse_on_network_thread(sql)) {
      return tl::make_unexpected(std::string("metadata statement on a network thread"));
    }
    const std::string text(sql);
    char* err = nullptr;
    if (sqlite3_exec(db_, text.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
      std::string msg = err != nullptr ? err : "error";
      sqlite3_free(err);
      SILT_LOG(info, "metadata (sqlite): %s", msg.c_str());
      return tl::make_unexpected(msg);
    }
    return {};
  }

  tl::expected<void, std::string> begin() override { return script("BEGIN IMMEDIATE"); }
  [[nodiscard]] dialect kind() const override { return dialect::sqlite; }

 private:
  sqlite3_stmt* prepare(std::string_view sql) {
    auto it = cache_.find(sql);
    if (it != cache_.end()) return it->second;
    sqlite3_stmt* stmt = nullptr;
    if (sqlite3_prepare_v2(db_, sql.data(), static_cast<int>(sql.size()), &stmt, nullptr) !=
        SQLITE_OK) {
      return nullptr;
    }
    cache_.emplace(std::string(sql), stmt);
    return stmt;
  }

  sqlite3* db_;
  std::map<std::string, sqlite3_stmt*, std::less<>> cache_;
};

class sqlite_database final : public database {
 public:
  explicit sqlite_database(std::string path) : path_(std::move(path)) {}
  // An in-memory database lives while a connection to it is open: this one.
  void keep_open(std::unique_ptr<connection> c) { keeper_ = std::move(c); }

  tl::expected<std::unique_ptr<connection>, std::string> connect() override {
    sqlite3* db = nullptr;
    const int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_URI;
    if (sqlite3_open_v2(path_.c_str(), &db, flags, nullptr) != SQLITE_OK) {
      std::string msg = "cannot open " + path_ + ": " + sqlite3_errmsg(db);
      sqlite3_close(db);
      return tl::make_unexpected(msg);
    }
    auto c = std::make_unique<sqlite_connection>(db);
    // Writers queue on SQLite's file lock; metadata transactions are short.
    sqlite3_busy_timeout(db, 10000);
    if (auto r =
            c->script("PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL; PRAGMA foreign_keys=ON");
        !r) {
      return tl::make_unexpected("cannot set up " + path_ + ": " + r.error());
    }
    return std::unique_ptr<connection>(std::move(c));
  }
  [[nodiscard]] dialect kind() const override { return dialect::sqlite; }
  [[nodiscard]] std::string describe() const override { return "sqlite://" + path_; }

 private:
  std::string path_;
  std::unique_ptr<connection> keeper_;
};

}  // namespace

tl::expected<std::shared_ptr<database>, std::string> open_sqlite(const std::string& path) {
  if (path.empty()) return tl::make_unexpected(std::string("the SQLite path is empty"));
  std::string p = path;
  if (path == ":memory:") {
    // Connections of one in-memory database share it; each database is a new one.
    static std::atomic<uint64_t> next{0};
    p = "file:silt-memory-" + std::to_string(next.fetch_add(1)) + "?mode=memory&cache=shared";
    auto db = std::make_shared<sqlite_database>(p);
    auto keeper = db->connect();
    if (!keeper) return tl::make_unexpected(keeper.error());
    db->keep_open(std::move(*keeper));
    return db;
  }
  return std::make_shared<sqlite_database>(p);
}

uint64_t sqlite_memory_bytes() {
  return static_cast<uint64_t>(sqlite3_memory_used());
}

}  // namespace silt::metadata::sql
