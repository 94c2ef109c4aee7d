// Small RAII helpers over the SQLite C API, shared by the metadata tables.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include <sqlite3.h>

namespace silt::metadata::sqlite {

// One prepared statement, finalized on scope exit.
class statement {
 public:
  statement(sqlite3* db, const char* sql) : db_(db) {
    if (sqlite3_prepare_v2(db, sql, -1, &stmt_, nullptr) != SQLITE_OK) {
      std::fprintf(stderr, "sqlite: prepare failed: %s: %s\n", sqlite3_errmsg(db), sql);
      stmt_ = nullptr;
    }
  }
  ~statement() { sqlite3_finalize(stmt_); }
  statement(const statement&) = delete;
  statement& operator=(const statement&) = delete;

  [[nodiscard]] bool ok() const { return stmt_ != nullptr; }
  statement& bind(int i, int64_t v) {
    if (stmt_) sqlite3_bind_int64(stmt_, i, v);
    return *this;
  }
  statement& bind(int i, const std::string& v) {
    if (stmt_) sqlite3_bind_text(stmt_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
    return *this;
  }
  // SQLITE_ROW, SQLITE_DONE, or an error code (logged).
  int step() {
    if (!stmt_) return SQLITE_ERROR;
    const int rc = sqlite3_step(stmt_);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
      std::fprintf(stderr, "sqlite: %s\n", sqlite3_errmsg(db_));
    }
    return rc;
  }
  statement& bind_blob(int i, const void* p, size_t n) {
    if (stmt_) sqlite3_bind_blob(stmt_, i, p, static_cast<int>(n), SQLITE_TRANSIENT);
    return *this;
  }
  [[nodiscard]] std::vector<uint8_t> blob(int col) const {
    const auto* p = static_cast<const uint8_t*>(sqlite3_column_blob(stmt_, col));
    const int n = sqlite3_column_bytes(stmt_, col);
    return p ? std::vector<uint8_t>(p, p + n) : std::vector<uint8_t>();
  }
  [[nodiscard]] int64_t integer(int col) const { return sqlite3_column_int64(stmt_, col); }
  [[nodiscard]] std::string text(int col) const {
    const auto* p = sqlite3_column_text(stmt_, col);
    return p ? std::string(reinterpret_cast<const char*>(p),
                           static_cast<size_t>(sqlite3_column_bytes(stmt_, col)))
             : std::string();
  }

 private:
  sqlite3* db_;
  sqlite3_stmt* stmt_ = nullptr;
};

// Rolls back unless committed.
class transaction {
 public:
  explicit transaction(sqlite3* db) : db_(db) {
    ok_ = sqlite3_exec(db, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr) == SQLITE_OK;
  }
  ~transaction() {
    if (ok_ && !done_) sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
  }
  transaction(const transaction&) = delete;
  transaction& operator=(const transaction&) = delete;
  [[nodiscard]] bool ok() const { return ok_; }
  [[nodiscard]] bool commit() {
    done_ = true;
    return sqlite3_exec(db_, "COMMIT", nullptr, nullptr, nullptr) == SQLITE_OK;
  }

 private:
  sqlite3* db_;
  bool ok_ = false;
  bool done_ = false;
};

}  // namespace silt::metadata::sqlite
