#include "metadata/broker_registry.h"

#include <charconv>
#include <fstream>
#include <utility>

#include <unistd.h>

namespace silt::metadata {

namespace {

tl::unexpected<membership_error> fail(membership_error e) {
  return tl::make_unexpected(e);
}

int64_t i64(base::node_id v) {
  return v.value();
}

std::string with_now(std::string_view sql, const std::string& now) {
  std::string out;
  for (size_t i = 0; i < sql.size();) {
    if (sql.substr(i, 5) == "{now}") {
      out += now;
      i += 5;
    } else {
      out += sql[i++];
    }
  }
  return out;
}

// Sets one column of (node, epoch)'s row: fenced once that registration is gone.
template <typename Value>
tl::expected<void, membership_error> set_column(sql::connection& c, std::string_view column,
                                                const Value& value, base::node_id node,
                                                int64_t broker_epoch) {
  auto r = c.query(
      "UPDATE brokers SET " + std::string(column) + " = ? WHERE node_id = ? AND broker_epoch = ?",
      value, i64(node), broker_epoch);
  if (!r) return fail(membership_error::io);
  if (r->changes == 0) return fail(membership_error::fenced);
  return {};
}

}  // namespace

std::string_view membership_error_name(membership_error e) {
  switch (e) {
    case membership_error::duplicate:
      return "the node id is registered by a live broker (its lease has not lapsed)";
    case membership_error::fenced:
      return "fenced: the lease lapsed or the node id registered again";
    case membership_error::io:
      return "the metadata store failed";
  }
  return "unknown";
}

std::string format_loads(const std::vector<stream_load>& loads) {
  std::string out;
  for (const auto& l : loads) {
    if (!out.empty()) out += ',';
    out += std::to_string(l.stream.value()) + ':' + std::to_string(l.bytes_per_s);
  }
  return out;
}

std::vector<stream_load> parse_loads(std::string_view text) {
  std::vector<stream_load> out;
  while (!text.empty()) {
    const size_t comma = text.find(',');
    const std::string_view item = text.substr(0, comma);
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
    const size_t colon = item.find(':');
    if (colon == std::string_view::npos) continue;
    uint64_t stream = 0;
    uint64_t rate = 0;
    const auto a = std::from_chars(item.data(), item.data() + colon, stream);
    const auto b = std::from_chars(item.data() + colon + 1, item.data() + item.size(), rate);
    if (a.ec != std::errc() || a.ptr != item.data() + colon || b.ec != std::errc() ||
        b.ptr != item.data() + item.size()) {
      continue;
    }
    out.push_back({base::stream_id(stream), rate});
  }
  return out;
}

std::string format_listeners(const std::vector<listener_endpoint>& listeners) {
  std::string out;
  for (const auto& l : listeners) {
    if (!out.empty()) out += ',';
    out += l.name;
    out += "://";
    if (l.host.find(':') != std::string::npos) {
      out += '[';
      out += l.host;
      out += ']';
    } else {
      out += l.host;
    }
    out += ':';
    out += std::to_string(l.port);
  }
  return out;
}

std::vector<listener_endpoint> parse_listeners(std::string_view text) {
  std::vector<listener_endpoint> out;
  while (!text.empty()) {
    const size_t comma = text.find(',');
    const std::string_view item = text.substr(0, comma);
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
    const size_t scheme = item.find("://");
    const size_t colon = item.rfind(':');
    if (scheme == std::string_view::npos || scheme == 0 || colon <= scheme + 2) continue;
    std::string_view host = item.substr(scheme + 3, colon - scheme - 3);
    if (host.starts_with('[') && host.ends_with(']') && host.size() >= 2) {
      host = host.substr(1, host.size() - 2);
    }
    int32_t port = 0;
    const auto p = std::from_chars(item.data() + colon + 1, item.data() + item.size(), port);
    if (p.ec != std::errc() || p.ptr != item.data() + item.size() || port <= 0 || port > 65535) {
      continue;
    }
    out.push_back({std::string(item.substr(0, scheme)), std::string(host), port});
  }
  return out;
}

std::string same_machine_id() {
  std::string boot;
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::getline(in, boot);
  char host[256] = {};
  (void)::gethostname(host, sizeof(host) - 1);
  return std::string(host) + "/" + boot;
}

broker_registry::broker_registry(std::shared_ptr<sql::database> db,
                                 std::unique_ptr<sql::connection> c)
    : db_(std::move(db)), c_(std::move(c)), now_(sql::now_ms_expression(db_->kind())) {}

broker_registry::~broker_registry() = default;

tl::expected<std::unique_ptr<broker_registry>, std::string> broker_registry::open(
    std::shared_ptr<sql::database> db) {
  auto c = db->connect();
  if (!c) return tl::make_unexpected(c.error());
  // Heartbeats twice a second need not each wait for an fsync of an SQLite file on the disk
  // the WAL uses: a lease lost in a crash of the machine is taken again at the next start.
  if ((*c)->kind() == sql::dialect::sqlite) {
    if (auto r = (*c)->script("PRAGMA synchronous=NORMAL"); !r)
      return tl::make_unexpected(r.error());
  }
  return std::unique_ptr<broker_registry>(new broker_registry(std::move(db), std::move(*c)));
}

tl::expected<int64_t, membership_error> broker_registry::register_broker(
    const broker_info& info, std::chrono::milliseconds session_timeout, bool replace_own) {
  base::lock_guard lock(mu_);
  sql::transaction tx(*c_);
  if (!tx.ok()) return fail(membership_error::io);
  // The counter's row lock orders registrations on PostgreSQL: what follows sees every
  // registration committed before this one.
  auto epoch = c_->query(
      "UPDATE registry_counters SET value = value + 1 WHERE name = 'broker_epoch' RETURNING value");
  if (!epoch || epoch->rows.empty()) return fail(membership_error::io);
  const int64_t broker_epoch = epoch->rows.front().integer(0);
  auto old = c_->query(with_now("SELECT CASE WHEN lease_expires_ms > {now} THEN 1 ELSE 0 END, "
                                "machine, wal_location FROM brokers WHERE node_id = ?",
                                now_),
                       i64(info.node));
  if (!old) return fail(membership_error::io);
  if (!old->rows.empty() && old->rows.front().integer(0) != 0) {
    const auto& r = old->rows.front();
    const bool own = replace_own && r.text(1) == info.machine && r.text(2) == info.wal_location;
    if (!own) return fail(membership_error::duplicate);
  }
  auto up = c_->query(
      with_now("INSERT INTO brokers(node_id, broker_epoch, host, port, rack, wal_location, "
               "machine, listeners, lease_expires_ms, registered_ms) "
               "VALUES(?,?,?,?,?,?,?,?,{now} + ?,{now}) "
               "ON CONFLICT(node_id) DO UPDATE SET broker_epoch = excluded.broker_epoch, "
               "host = excluded.host, port = excluded.port, rack = excluded.rack, "
               "wal_location = excluded.wal_location, machine = excluded.machine, "
               "listeners = excluded.listeners, lease_expires_ms = excluded.lease_expires_ms, "
               "registered_ms = excluded.registered_ms, draining = 0, topics_applied = -1",
               now_),
      i64(info.node), broker_epoch, std::string_view(info.host), int64_t{info.port},
      std::string_view(info.rack), std::string_view(info.wal_location),
      std::string_view(info.machine), format_listeners(info.listeners),
      static_cast<int64_t>(session_timeout.count()));
  if (!up) return fail(membership_error::io);
  if (!tx.commit()) return fail(membership_error::io);
  return broker_epoch;
}

tl::expected<void, membership_error> broker_registry::heartbeat(
    base::node_id node, int64_t broker_epoch, std::chrono::milliseconds session_timeout) {
  base::lock_guard lock(mu_);
  auto r = c_->query(with_now("UPDATE brokers SET lease_expires_ms = {now} + ? WHERE node_id = ? "
                              "AND broker_epoch = ? AND lease_expires_ms > {now}",
                              now_),
                     static_cast<int64_t>(session_timeout.count()), i64(node), broker_epoch);
  if (!r) return fail(membership_error::io);
  if (r->changes == 0) return fail(membership_error::fenced);
  return {};
}

tl::expected<void, membership_error> broker_registry::report_loads(
    base::node_id node, int64_t broker_epoch, const std::vector<stream_load>& loads) {
  base::lock_guard lock(mu_);
  return set_column(*c_, "stream_loads", format_loads(loads), node, broker_epoch);
}

tl::expected<void, membership_error> broker_registry::report_topics_applied(base::node_id node,
                                                                            int64_t broker_epoch,
                                                                            int64_t applied) {
  base::lock_guard lock(mu_);
  return set_column(*c_, "topics_applied", applied, node, broker_epoch);
}

tl::expected<std::vector<topics_applied_by>, membership_error> broker_registry::topics_applied() {
  base::lock_guard lock(mu_);
  auto r =
      c_->query(with_now("SELECT node_id, topics_applied FROM brokers WHERE "
                         "lease_expires_ms > {now} ORDER BY node_id",
                         now_));
  if (!r) return fail(membership_error::io);
  std::vector<topics_applied_by> out;
  out.reserve(r->rows.size());
  for (const auto& row : r->rows) {
    out.push_back({base::node_id(static_cast<int32_t>(row.integer(0))), row.integer(1)});
  }
  return out;
}

tl::expected<void, membership_error> broker_registry::drain(base::node_id node,
                                                            int64_t broker_epoch) {
  base::lock_guard lock(mu_);
  return set_column(*c_, "draining", int64_t{1}, node, broker_epoch);
}

tl::expected<void, membership_error> broker_registry::unregister(base::node_id node,
                                                                 int64_t broker_epoch) {
  base::lock_guard lock(mu_);
  auto r = c_->query(with_now("UPDATE brokers SET lease_expires_ms = {now} WHERE node_id = ? AND "
                              "broker_epoch = ? AND lease_expires_ms > {now}",
                              now_),
                     i64(node), broker_epoch);
  if (!r) return fail(membership_error::io);
  if (r->changes == 0) return fail(membership_error::fenced);
  return {};
}

tl::expected<std::vector<broker_record>, membership_error> broker_registry::brokers() {
  base::lock_guard lock(mu_);
  auto r = c_->query(
      with_now("SELECT node_id, broker_epoch, host, port, rack, wal_location, "
               "machine, lease_expires_ms - {now}, draining, stream_loads, listeners FROM brokers "
               "ORDER BY "
               "node_id",
               now_));
  if (!r) return fail(membership_error::io);
  std::vector<broker_record> out;
  out.reserve(r->rows.size());
  for (const auto& row : r->rows) {
    broker_record b;
    b.info.node = base::node_id(static_cast<int32_t>(row.integer(0)));
    b.broker_epoch = row.integer(1);
    b.info.host = row.text(2);
    b.info.port = static_cast<int32_t>(row.integer(3));
    b.info.rack = row.text(4);
    b.info.wal_location = row.text(5);
    b.info.machine = row.text(6);
    b.lease_left_ms = row.integer(7);
    b.draining = row.integer(8) != 0;
    b.loads = parse_loads(row.text(9));
    b.info.listeners = parse_listeners(row.text(10));
    out.push_back(std::move(b));
  }
  return out;
}

tl::expected<int64_t, membership_error> broker_registry::claim_controller(
    base::node_id node, int64_t broker_epoch, std::chrono::milliseconds lease) {
  base::lock_guard lock(mu_);
  sql::transaction tx(*c_);
  if (!tx.ok()) return fail(membership_error::io);
  // Only a member may control: its own broker lease must be live at this epoch.
  auto own = c_->query(with_now("SELECT 1 FROM brokers WHERE node_id = ? AND broker_epoch = ? "
                                "AND lease_expires_ms > {now}",
                                now_),
                       i64(node), broker_epoch);
  if (!own) return fail(membership_error::io);
  if (own->rows.empty()) return fail(membership_error::fenced);
  // Renewed by its holder; taken at the next epoch by anyone once it lapsed.
  auto r = c_->query(
      with_now("UPDATE controller SET epoch = CASE WHEN node_id = ? AND lease_expires_ms > {now} "
               "THEN epoch ELSE epoch + 1 END, node_id = ?, lease_expires_ms = {now} + ? "
               "WHERE id = 0 AND (node_id = ? OR lease_expires_ms <= {now}) RETURNING epoch",
               now_),
      i64(node), i64(node), static_cast<int64_t>(lease.count()), i64(node));
  if (!r) return fail(membership_error::io);
  if (r->rows.empty()) return fail(membership_error::fenced);
  const int64_t epoch = r->rows.front().integer(0);
  if (!tx.commit()) return fail(membership_error::io);
  return epoch;
}

void broker_registry::release_controller(base::node_id node, int64_t epoch) {
  base::lock_guard lock(mu_);
  (void)c_->query(
      with_now("UPDATE controller SET lease_expires_ms = {now} WHERE id = 0 AND node_id = ? AND "
               "epoch = ?",
               now_),
      i64(node), epoch);
}

tl::expected<base::node_id, membership_error> broker_registry::controller() {
  base::lock_guard lock(mu_);
  auto r =
      c_->query(with_now("SELECT CASE WHEN lease_expires_ms > {now} THEN node_id ELSE -1 END "
                         "FROM controller WHERE id = 0",
                         now_));
  if (!r) return fail(membership_error::io);
  if (r->rows.empty()) return base::node_id(-1);
  return base::node_id(static_cast<int32_t>(r->rows.front().integer(0)));
}

tl::expected<std::vector<wal_takeover>, membership_error> broker_registry::takeovers() {
  base::lock_guard lock(mu_);
  auto r = c_->query("SELECT node_id, holder, wal_location FROM wal_takeovers ORDER BY node_id");
  if (!r) return fail(membership_error::io);
  std::vector<wal_takeover> out;
  out.reserve(r->rows.size());
  for (const auto& row : r->rows) {
    out.push_back({base::node_id(static_cast<int32_t>(row.integer(0))),
                   base::node_id(static_cast<int32_t>(row.integer(1))), row.text(2)});
  }
  return out;
}

tl::expected<size_t, membership_error> broker_registry::place_takeovers(
    base::node_id controller, int64_t controller_epoch, const std::vector<wal_takeover>& rows) {
  base::lock_guard lock(mu_);
  sql::transaction tx(*c_);
  if (!tx.ok()) return fail(membership_error::io);
  // The row lock registrations take first (register_broker()): a registration either
  // committed before this reads the brokers' leases, or waits until this committed.
  if (!c_->query("UPDATE registry_counters SET value = value WHERE name = 'broker_epoch'")) {
    return fail(membership_error::io);
  }
  auto holds = controller_holds(*c_, controller, controller_epoch);
  if (!holds) return fail(membership_error::io);
  if (!*holds) return fail(membership_error::fenced);
  size_t written = 0;
  for (const auto& t : rows) {
    auto up = c_->query("UPDATE wal_takeovers SET holder = ? WHERE node_id = ?", i64(t.holder),
                        i64(t.node));
    if (!up) return fail(membership_error::io);
    if (up->changes > 0) {
      ++written;
      continue;
    }
    auto in = c_->query(
        with_now("INSERT INTO wal_takeovers(node_id, holder, wal_location, created_ms) "
                 "SELECT node_id, ?, wal_location, {now} FROM brokers WHERE node_id = ? AND "
                 "lease_expires_ms <= {now}",
                 now_),
        i64(t.holder), i64(t.node));
    if (!in) return fail(membership_error::io);
    written += static_cast<size_t>(in->changes);
  }
  if (!tx.commit()) return fail(membership_error::io);
  return written;
}

tl::expected<bool, std::string> takeover_held(sql::connection& c, base::node_id node,
                                              base::node_id holder) {
  auto r = c.query("SELECT 1 FROM wal_takeovers WHERE node_id = ? AND holder = ?", i64(node),
                   i64(holder));
  if (!r) return tl::make_unexpected(r.error());
  return !r->rows.empty();
}

tl::expected<bool, std::string> controller_holds(sql::connection& c, base::node_id node,
                                                 int64_t epoch) {
  const std::string q = with_now(
      "SELECT 1 FROM controller WHERE id = 0 AND node_id = ? AND epoch = ? AND "
      "lease_expires_ms > {now}",
      std::string(sql::now_ms_expression(c.kind())));
  auto r = c.query(q, i64(node), epoch);
  if (!r) return tl::make_unexpected(r.error());
  return !r->rows.empty();
}

tl::expected<bool, std::string> lease_lapsed(sql::connection& c, base::node_id node) {
  const std::string q = with_now(
      "SELECT CASE WHEN lease_expires_ms > {now} THEN 1 ELSE 0 END FROM brokers WHERE node_id = ?",
      std::string(sql::now_ms_expression(c.kind())));
  auto r = c.query(q, i64(node));
  if (!r) return tl::make_unexpected(r.error());
  return !r->rows.empty() && r->rows.front().integer(0) == 0;
}

tl::expected<bool, std::string> takes_streams(sql::connection& c, base::node_id node) {
  const bool pg = c.kind() == sql::dialect::postgresql;
  const std::string q = with_now(
      "SELECT CASE WHEN lease_expires_ms > {now} AND draining = 0 THEN 1 ELSE 0 END FROM brokers "
      "WHERE node_id = ?" +
          std::string(pg ? " FOR SHARE" : ""),
      std::string(sql::now_ms_expression(c.kind())));
  auto r = c.query(q, i64(node));
  if (!r) return tl::make_unexpected(r.error());
  return r->rows.empty() || r->rows.front().integer(0) == 1;
}

}  // namespace silt::metadata
