// The two drivers behind sql::database (sql_sqlite.cc, sql_postgresql.cc).
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "metadata/sql.h"

namespace silt::metadata::sql {

// `path` is a file path or ":memory:".
[[nodiscard]] tl::expected<std::shared_ptr<database>, std::string> open_sqlite(
    const std::string& path);
// `uri` is a libpq connection URI.
[[nodiscard]] tl::expected<std::shared_ptr<database>, std::string> open_postgresql(
    const std::string& uri);

// Counts a write statement run outside a transaction (for committed_transactions()); call
// after it succeeded.
void count_statement(const connection& c, std::string_view sql);

// True (and the attempt logged and counted) when the calling thread serves connections.
[[nodiscard]] bool refuse_on_network_thread(std::string_view sql);

}  // namespace silt::metadata::sql
