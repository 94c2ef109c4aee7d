// PostgreSQL driver (libpq). Statements are prepared once per connection; integers and text
// travel in text form, byte strings in binary. Every wait is bounded: connecting by
// connect_timeout, a statement by statement_timeout, a dead peer by TCP keepalives and
// tcp_user_timeout. A connection found broken is re-established before the next statement.
// libpq's messages may quote the connection URI or a piece of it (a malformed one, a
// percent-escape it cannot decode): every message is masked (base::redact_secrets) before it
// is logged or returned.
#include <charconv>
#include <cstdio>
#include <cstring>
#include <map>

#include <libpq-fe.h>

#include "base/log.h"
#include "base/redact.h"
#include "metadata/sql_drivers.h"

namespace silt::metadata::sql {

namespace {

constexpr unsigned kByteaOid = 17;
constexpr unsigned kInt8Oid = 20;
constexpr unsigned kInt2Oid = 21;
constexpr unsigned kInt4Oid = 23;

struct result_deleter {
  void operator()(PGresult* r) const { PQclear(r); }
};
using result_ptr = std::unique_ptr<PGresult, result_deleter>;

// `?` placeholders become $1, $2, ... (outside quoted literals and identifiers).
std::string number_placeholders(std::string_view sql) {
  std::string out;
  out.reserve(sql.size() + 8);
  int n = 0;
  char quote = 0;
  for (char c : sql) {
    if (quote != 0) {
      if (c == quote) quote = 0;
      out += c;
    } else if (c == '\'' || c == '"') {
      quote = c;
      out += c;
    } else if (c == '?') {
      out += '$';
      out += std::to_string(++n);
    } else {
      out += c;
    }
  }
  return out;
}

// A libpq message, without its trailing newlines and with the credentials of `uri` masked.
std::string masked(std::string_view message, std::string_view uri) {
  while (message.ends_with('\n')) message.remove_suffix(1);
  return base::redact_secrets(message, uri);
}

class pg_connection final : public connection {
 public:
  // `uri` is what `conn` was opened with: PQreset reconnects with it, and messages are masked
  // with it.
  pg_connection(PGconn* conn, std::string uri) : conn_(conn), uri_(std::move(uri)) {}
  ~pg_connection() override { PQfinish(conn_); }

  tl::expected<result, std::string> run(std::string_view sql,
                                        std::span<const param> params) override {
    if (refuse_on_network_thread(sql)) {
      return tl::make_unexpected(std::string("metadata statement on a network thread"));
    }
    if (auto r = ensure_connected(); !r) return tl::make_unexpected(r.error());
    auto name = prepare(sql, static_cast<int>(params.size()));
    if (!name) return tl::make_unexpected(name.error());

    std::vector<std::string> texts(params.size());
    std::vector<const char*> values(params.size(), nullptr);
    std::vector<int> lengths(params.size(), 0);
    std::vector<int> formats(params.size(), 0);
    for (size_t i = 0; i < params.size(); ++i) {
      const param& p = params[i];
      if (std::holds_alternative<int64_t>(p)) {
        texts[i] = std::to_string(std::get<int64_t>(p));
        values[i] = texts[i].c_str();
      } else if (std::holds_alternative<std::string_view>(p)) {
        texts[i] = std::string(std::get<std::string_view>(p));
        values[i] = texts[i].c_str();
      } else if (std::holds_alternative<bytes_view>(p)) {
        const auto b = std::get<bytes_view>(p).data;
        texts[i].assign(reinterpret_cast<const char*>(b.data()), b.size());
        values[i] = texts[i].data();
        lengths[i] = static_cast<int>(b.size());
        formats[i] = 1;
      }
    }
    result_ptr res(PQexecPrepared(conn_, name->c_str(), static_cast<int>(params.size()),
                                  values.data(), lengths.data(), formats.data(), 0));
    const auto status = res ? PQresultStatus(res.get()) : PGRES_FATAL_ERROR;
    if (status != PGRES_TUPLES_OK && status != PGRES_COMMAND_OK) {
      return tl::make_unexpected(error(res.get(), sql));
    }
    result out;
    const int nrows = PQntuples(res.get());
    const int ncols = PQnfields(res.get());
    out.rows.reserve(static_cast<size_t>(nrows));
    for (int r = 0; r < nrows; ++r) {
      std::vector<value> row_values(static_cast<size_t>(ncols));
      for (int c = 0; c < ncols; ++c) {
        if (PQgetisnull(res.get(), r, c) != 0) continue;
        value& v = row_values[static_cast<size_t>(c)];
        const char* text = PQgetvalue(res.get(), r, c);
        const auto len = static_cast<size_t>(PQgetlength(res.get(), r, c));
        switch (PQftype(res.get(), c)) {
          case kInt8Oid:
          case kInt4Oid:
          case kInt2Oid:
            v.kind = value::type::integer;
            std::from_chars(text, text + len, v.integer);
            break;
          case kByteaOid: {
            v.kind = value::type::blob;
            size_t n = 0;
            unsigned char* raw = PQunescapeBytea(reinterpret_cast<const unsigned char*>(text), &n);
            if (raw != nullptr) {
              v.text.assign(reinterpret_cast<const char*>(raw), n);
              PQfreemem(raw);
            }
            break;
          }
          default:
            v.kind = value::type::text;
            v.text.assign(text, len);
            break;
        }
      }
      out.rows.emplace_back(std::move(row_values));
    }
    const char* changed = PQcmdTuples(res.get());
    if (changed != nullptr && *changed != 0) {
      std::from_chars(changed, changed + std::strlen(changed), out.changes);
    }
    count_statement(*this, sql);
    return out;
  }

  tl::expected<void, std::string> script(std::string_view sql) override {
    if (refuse_on_network_thread(sql)) {
      return tl::make_unexpected(std::string("metadata statement on a network thread"));
    }
    if (auto r = ensure_connected(); !r) return tl::make_unexpected(r.error());
    const std::string text(sql);
    result_ptr res(PQexec(conn_, text.c_str()));
    const auto status = res ? PQresultStatus(res.get()) : PGRES_FATAL_ERROR;
    if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK) {
      return tl::make_unexpected(error(res.get(), sql));
    }
    return {};
  }

  tl::expected<void, std::string> begin() override { return script("BEGIN"); }
  [[nodiscard]] dialect kind() const override { return dialect::postgresql; }

 private:
  tl::expected<void, std::string> ensure_connected() {
    if (PQstatus(conn_) == CONNECTION_OK) return {};
    prepared_.clear();
    PQreset(conn_);
    if (PQstatus(conn_) != CONNECTION_OK) {
      const std::string msg =
          "cannot reach " + base::redact_uri(uri_) + ": " + masked(PQerrorMessage(conn_), uri_);
      SILT_LOG(info, "metadata (postgresql): %s", msg.c_str());
      return tl::make_unexpected(msg);
    }
    return {};
  }

  tl::expected<std::string, std::string> prepare(std::string_view sql, int nparams) {
    auto it = prepared_.find(sql);
    if (it != prepared_.end()) return it->second;
    std::string name = "s" + std::to_string(prepared_.size());
    const std::string text = number_placeholders(sql);
    result_ptr res(PQprepare(conn_, name.c_str(), text.c_str(), nparams, nullptr));
    if (!res || PQresultStatus(res.get()) != PGRES_COMMAND_OK) {
      return tl::make_unexpected(error(res.get(), sql));
    }
    prepared_.emplace(std::string(sql), name);
    return name;
  }

  std::string error(PGresult* res, std::string_view sql) {
    std::string msg =
        masked(res != nullptr ? PQresultErrorMessage(res) : PQerrorMessage(conn_), uri_);
    if (msg.empty()) msg = masked(PQerrorMessage(conn_), uri_);
    SILT_LOG(info, "metadata (postgresql): %s: %.*s", msg.c_str(),
             static_cast<int>(std::min<size_t>(sql.size(), 200)), sql.data());
    return msg;
  }

  PGconn* conn_;
  std::string uri_;
  std::map<std::string, std::string, std::less<>> prepared_;
};

class pg_database final : public database {
 public:
  explicit pg_database(std::string uri) : uri_(std::move(uri)) {}

  tl::expected<std::unique_ptr<connection>, std::string> connect() override {
    // Defaults first: what the URI names overrides them.
    const char* keys[] = {"connect_timeout",  "keepalives_idle",  "keepalives_interval",
                          "keepalives_count", "tcp_user_timeout", "application_name",
                          "options",          "dbname",           nullptr};
    const char* values[] = {
        "5",
        "5",
        "2",
        "3",
        "10000",
        "silt",
        "-c statement_timeout=10000 -c idle_in_transaction_session_timeout=30000",
        uri_.c_str(),
        nullptr};
    PGconn* conn = PQconnectdbParams(keys, values, 1);
    if (conn == nullptr || PQstatus(conn) != CONNECTION_OK) {
      std::string msg = "cannot connect to " + describe() + ": " +
                        (conn != nullptr ? masked(PQerrorMessage(conn), uri_) : "out of memory");
      PQfinish(conn);
      return tl::make_unexpected(msg);
    }
    // Only warnings and errors from the server; notices (e.g. "relation exists") are noise.
    PQclear(PQexec(conn, "SET client_min_messages = warning"));
    return std::unique_ptr<connection>(std::make_unique<pg_connection>(conn, uri_));
  }
  [[nodiscard]] dialect kind() const override { return dialect::postgresql; }
  [[nodiscard]] std::string describe() const override { return base::redact_uri(uri_); }

 private:
  std::string uri_;
};

}  // namespace

tl::expected<std::shared_ptr<database>, std::string> open_postgresql(const std::string& uri) {
  return std::make_shared<pg_database>(uri);
}

}  // namespace silt::metadata::sql
