#include "metadata/testing/test_database.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <stdexcept>

#include <libpq-fe.h>
#include <unistd.h>

namespace silt::metadata::testing {

namespace {

// A server this process started, stopped when the process exits.
struct own_server {
  std::filesystem::path dir;
  std::string uri;
  ~own_server() {
    if (dir.empty()) return;
    const std::string cmd =
        std::string(SILT_SOURCE_DIR) + "/scripts/pg-test-server.sh stop " + dir.string();
    // NOLINTNEXTLINE(cert-env33-c,concurrency-mt-unsafe): tests only, at exit
    (void)std::system(cmd.c_str());
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
};

std::string server_uri() {
  static std::mutex mu;
  static own_server server;
  std::lock_guard lock(mu);
  // NOLINTNEXTLINE(concurrency-mt-unsafe): read under the mutex; nothing sets it
  if (const char* env = std::getenv("SILT_TEST_POSTGRES_URI"); env != nullptr && *env != 0) {
    return env;
  }
  if (!server.uri.empty()) return server.uri;
  server.dir = std::filesystem::temp_directory_path() / ("silt-pg-" + std::to_string(::getpid()));
  const std::string cmd =
      std::string(SILT_SOURCE_DIR) + "/scripts/pg-test-server.sh start " + server.dir.string();
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) throw std::runtime_error("cannot run " + cmd);
  std::string out;
  char buf[256];
  while (std::fgets(buf, sizeof buf, p) != nullptr) out += buf;
  if (::pclose(p) != 0) throw std::runtime_error("the PostgreSQL test server did not start");
  const std::string prefix = "export SILT_TEST_POSTGRES_URI=";
  const size_t at = out.find(prefix);
  if (at == std::string::npos) throw std::runtime_error("unexpected output: " + out);
  server.uri = out.substr(at + prefix.size());
  while (!server.uri.empty() && (server.uri.back() == '\n' || server.uri.back() == '\r')) {
    server.uri.pop_back();
  }
  return server.uri;
}

}  // namespace

std::vector<std::string> backends() {
  return {"sqlite", "postgresql"};
}

std::string fresh_uri(const std::string& backend, const std::filesystem::path& dir) {
  static std::atomic<int> next{0};
  const std::string name = "t" + std::to_string(::getpid()) + "_" + std::to_string(next++);
  if (backend == "sqlite") return "sqlite://" + (dir / (name + ".db")).string();
  const std::string admin = server_uri();
  PGconn* c = PQconnectdb(admin.c_str());
  if (PQstatus(c) != CONNECTION_OK) {
    const std::string msg = PQerrorMessage(c);
    PQfinish(c);
    throw std::runtime_error("cannot connect to " + admin + ": " + msg);
  }
  PGresult* r = PQexec(c, ("CREATE DATABASE " + name).c_str());
  const bool ok = PQresultStatus(r) == PGRES_COMMAND_OK;
  const std::string msg = PQerrorMessage(c);
  PQclear(r);
  PQfinish(c);
  if (!ok) throw std::runtime_error("CREATE DATABASE " + name + ": " + msg);
  return admin.substr(0, admin.rfind('/') + 1) + name;
}

}  // namespace silt::metadata::testing
