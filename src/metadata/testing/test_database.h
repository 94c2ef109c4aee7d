// Databases for tests that run against both metadata backends: an SQLite file, or a fresh
// database in a throwaway PostgreSQL server (scripts/pg-test-server.sh). The server is the
// one SILT_TEST_POSTGRES_URI names (scripts/run-ctest.sh starts one for the whole run), else
// one this process starts on first use and stops at exit.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace silt::metadata::testing {

// "sqlite" and "postgresql".
[[nodiscard]] std::vector<std::string> backends();

// The URI of a new, empty database: `dir`/NAME.db for SQLite, a new database for PostgreSQL.
[[nodiscard]] std::string fresh_uri(const std::string& backend, const std::filesystem::path& dir);

}  // namespace silt::metadata::testing
