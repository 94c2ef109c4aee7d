#include "handlers/broker.h"

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <map>
#include <system_error>
#include <thread>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include "base/endian.h"
#include "base/log.h"
#include "base/memory.h"
#include "handlers/handlers.h"
#include "protocol/request_header.h"

namespace silt::handlers {

template <typename Resp>
net::response encode_response(const protocol::parsed_request_header& h, const Resp& r,
                              size_t zero_copy_threshold) {
  const int16_t version = h.header.request_api_version;
  const int16_t header_version =
      protocol::response_header_version(h.header.request_api_key, version);
  protocol::writer w(r.encoded_size(version) + 16);
  w.set_zero_copy_threshold(zero_copy_threshold);
  w.int32(0);  // size, patched below
  w.int32(h.header.correlation_id);
  if (header_version >= 1) w.uvarint(0);  // no tagged fields
  r.encode(w, version);
  net::response out;
  if (!w.ok()) return net::response::close_connection();
  out.segments = w.segments();
  out.bytes = std::move(w.buffer());
  base::store_be<int32_t>(out.bytes.data(), static_cast<int32_t>(out.size() - 4));
  return out;
}

namespace {

namespace fs = std::filesystem;

// Walks a fault spec, "key=number,...", calling set(key, number) for each item; false from
// set: an unknown key.
tl::expected<void, std::string> walk_fault_spec(
    std::string_view spec, const std::function<bool(const std::string&, double)>& set) {
  while (!spec.empty()) {
    const size_t comma = spec.find(',');
    const std::string_view item = spec.substr(0, comma);
    spec = comma == std::string_view::npos ? std::string_view() : spec.substr(comma + 1);
    const size_t eq = item.find('=');
    if (eq == std::string_view::npos) return tl::make_unexpected("expected key=value");
    const std::string key(item.substr(0, eq));
    const std::string value(item.substr(eq + 1));
    char* end = nullptr;
    const double v = std::strtod(value.c_str(), &end);
    if (value.empty() || *end != '\0' || v < 0) {
      std::string message = "bad value '";
      message += value;
      message += "' for ";
      message += key;
      return tl::make_unexpected(std::move(message));
    }
    if (!set(key, v)) return tl::make_unexpected("unknown key '" + key + "'");
  }
  return {};
}

// SILT_TEST_WAL_FAULTS, for tests of real clients against a failing disk:
// "fail=P,delay=P,delay_ms=N,seed=N" (probabilities per WAL write; any subset).
tl::expected<storage::wal::write_faults::options, std::string> parse_wal_faults(
    std::string_view spec) {
  storage::wal::write_faults::options o;
  auto walked = walk_fault_spec(spec, [&o](const std::string& key, double v) {
    if (key == "fail") {
      o.fail_probability = v;
    } else if (key == "delay") {
      o.delay_probability = v;
    } else if (key == "delay_ms") {
      o.delay = std::chrono::milliseconds(static_cast<int64_t>(v));
    } else if (key == "seed") {
      o.seed = static_cast<uint64_t>(v);
    } else {
      return false;
    }
    return true;
  });
  if (!walked) return tl::make_unexpected(walked.error());
  if (o.fail_probability + o.delay_probability > 1) {
    return tl::make_unexpected("fail + delay must be at most 1");
  }
  return o;
}

// SILT_TEST_STORE_FAULTS, for tests of real clients against a failing object store:
// "error=P,throttle=P,timeout=P,slow=P,partial=P,lost=P,delay_ms=N,seed=N,on_ms=N,off_ms=N"
// (probabilities per call; with off_ms, faults only in the first on_ms of every
// on_ms + off_ms).
tl::expected<storage::faulty_store_options, std::string> parse_store_faults(std::string_view spec) {
  storage::faulty_store_options o;
  auto walked = walk_fault_spec(spec, [&o](const std::string& key, double v) {
    const auto ms = std::chrono::milliseconds(static_cast<int64_t>(v));
    if (key == "error") {
      o.error_probability = v;
    } else if (key == "throttle") {
      o.throttle_probability = v;
    } else if (key == "timeout") {
      o.timeout_probability = v;
    } else if (key == "slow") {
      o.slow_probability = v;
    } else if (key == "partial") {
      o.partial_probability = v;
    } else if (key == "lost") {
      o.lost_reply_probability = v;
    } else if (key == "delay_ms") {
      o.timeout_delay = ms;
      o.slow_delay = ms;
    } else if (key == "seed") {
      o.seed = static_cast<uint64_t>(v);
    } else if (key == "on_ms") {
      o.on_period = ms;
    } else if (key == "off_ms") {
      o.off_period = ms;
    } else {
      return false;
    }
    return true;
  });
  if (!walked) return tl::make_unexpected(walked.error());
  if (o.error_probability + o.throttle_probability + o.timeout_probability + o.slow_probability +
          o.partial_probability + o.lost_reply_probability >
      1) {
    return tl::make_unexpected("the probabilities add up to more than 1");
  }
  if (o.off_period.count() > 0 && o.on_period.count() <= 0) {
    return tl::make_unexpected("off_ms needs on_ms");
  }
  return o;
}

// Decodes the request body at its version, runs the handler and encodes what it returns.
// A body that does not decode closes the connection, as Kafka does.
template <typename Req, typename Fn>
asio::awaitable<net::response> serve(context& ctx, net::request& raw, Fn fn) {
  const int16_t version = raw.header.header.request_api_version;
  Req req;
  protocol::reader r(raw.body());
  req.decode(r, version);
  if (!r.ok()) co_return net::response::close_connection();
  auto resp = co_await fn(ctx, raw, req);
  co_return encode_response(raw.header, resp);
}

// The same on the blocking pool, for APIs whose handlers use the metadata store (a
// transaction, an fsync or a database round trip each): network threads never wait on it.
template <typename Req, typename Fn>
asio::awaitable<net::response> serve_blocking(context& ctx, net::request& raw, Fn fn) {
  co_return co_await asio::co_spawn(ctx.blocking, serve<Req>(ctx, raw, fn), asio::use_awaitable);
}

// Locks the WAL for this process: `<wal.path>.lock`, or the block device itself. The lock
// goes with the process, however it ends; the file descriptor is the broker's to close.
tl::expected<int, std::string> lock_wal(const std::string& wal_path) {
  const bool device = wal_path.starts_with("/dev/");
  const std::string path = device ? wal_path : wal_path + ".lock";
  // NOLINTNEXTLINE(cppcoreguidelines-pro-type-vararg): open(2) takes a mode
  const int fd = ::open(path.c_str(), (device ? O_RDONLY : O_RDWR | O_CREAT) | O_CLOEXEC, 0644);
  if (fd < 0) {
    return tl::make_unexpected("cannot open " + path + ": " +
                               std::error_code(errno, std::generic_category()).message());
  }
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int e = errno;
    ::close(fd);
    if (e == EWOULDBLOCK) {
      return tl::make_unexpected("the WAL " + wal_path + " is in use by another broker process (" +
                                 path + " is locked)");
    }
    return tl::make_unexpected("cannot lock " + path + ": " +
                               std::error_code(e, std::generic_category()).message());
  }
  return fd;
}

}  // namespace

broker::broker(const config::broker_config& config)
    : config_(config), blocking_(std::max<uint32_t>(1, config.num_io_threads)) {}

broker::~broker() {
  try {
    close();
    controller_.reset();  // its callback uses the group coordinator, destroyed before it
    blocking_.join();
    if (wal_lock_fd_ >= 0) ::close(wal_lock_fd_);
  } catch (const std::exception& e) {
    SILT_LOG(warn, "silt: closing the broker failed: %s", e.what());
  }
}

tl::expected<std::unique_ptr<broker>, std::string> broker::open(
    const config::broker_config& config) {
  std::unique_ptr<broker> b(new broker(config));
  std::error_code ec;
  fs::create_directories(config.data_dir, ec);
  if (ec)
    return tl::make_unexpected("cannot create data.dir " + config.data_dir + ": " + ec.message());
  const bool object_wal = config.wal_type == "object";
  // With the WAL in objects, the lock is a file in data.dir: it still keeps a second process
  // of this broker from starting on this machine.
  const std::string wal_lock_path =
      object_wal ? (fs::path(config.data_dir) / "object-wal").string() : config.wal_path;
  std::vector<fs::path> dirs{fs::path(wal_lock_path).parent_path()};
  if (config.metadata_store_uri.starts_with("sqlite://")) {
    dirs.push_back(fs::path(config.metadata_store_uri.substr(9)).parent_path());
  }
  for (const auto& p : dirs) {
    if (!p.empty()) fs::create_directories(p, ec);
  }
  auto locked = lock_wal(wal_lock_path);
  if (!locked) return tl::make_unexpected(locked.error());
  b->wal_lock_fd_ = *locked;
  auto db = metadata::sql::open_database(config.metadata_store_uri);
  if (!db) return tl::make_unexpected("metadata.store.uri: " + db.error());
  auto objects = storage::open_object_store(config.object_store_uri);
  if (!objects) return tl::make_unexpected("object.store.uri: " + objects.error());
  // NOLINTNEXTLINE(concurrency-mt-unsafe): read once at open, nothing sets the environment
  if (const char* faults = std::getenv("SILT_TEST_STORE_FAULTS"); faults != nullptr) {
    auto parsed = parse_store_faults(faults);
    if (!parsed) return tl::make_unexpected("SILT_TEST_STORE_FAULTS: " + parsed.error());
    SILT_LOG(warn, "silt: injecting object store faults (SILT_TEST_STORE_FAULTS=%s)", faults);
    b->faulty_inner_ = std::move(*objects);
    *objects = std::make_unique<storage::faulty_store>(*b->faulty_inner_, *parsed);
  }
  auto metered = std::make_unique<storage::metered_store>(std::move(*objects));
  b->metered_objects_ = metered.get();
  b->objects_ = std::move(metered);

  // Membership: registered (at a new broker epoch) before the WAL is opened or anything taken;
  // while another broker is taking this node's WAL over, start() waits for it to finish.
  cluster::membership_options mo;
  mo.self.node = base::node_id(config.node_id);
  mo.self.host = config::advertised_endpoint(config).host;
  mo.self.port = config::advertised_endpoint(config).port;
  mo.self.rack = config.broker_rack;
  std::error_code abs_ec;
  const std::string wal_prefix = "wal/node-" + std::to_string(config.node_id) + "/";
  mo.self.wal_location =
      object_wal ? std::string(storage::stream_store::object_wal_location_prefix) + wal_prefix
                 : fs::absolute(config.wal_path, abs_ec).lexically_normal().string();
  mo.self.machine = metadata::same_machine_id();
  mo.heartbeat_interval = std::chrono::milliseconds(config.broker_heartbeat_interval_ms);
  mo.session_timeout = std::chrono::milliseconds(config.broker_session_timeout_ms);
  mo.holds_wal_lock = true;
  auto member = cluster::membership::start(*db, mo);
  if (!member) return tl::make_unexpected(member.error());
  b->membership_ = std::move(*member);
  storage::stream_store_options so;
  so.wal.path = config.wal_path;
  so.wal.capacity = config.wal_capacity_bytes;
  so.wal.iodepth = config.wal_iodepth;
  so.wal.iops = config.wal_iops;
  so.wal.commit_delay = std::chrono::microseconds(config.wal_commit_delay_us);
  so.wal.sync = config.wal_sync == "fdatasync" ? storage::wal::sync_mode::fdatasync
                                               : storage::wal::sync_mode::dsync;
  so.wal.engine = config.wal_io_engine == "uring" ? storage::wal::io_engine::uring
                                                  : storage::wal::io_engine::threads;
  so.wal.thread_nice = config.latency_threads_nice;
  if (object_wal) {
    storage::wal::object_wal_options ow;
    ow.prefix = wal_prefix;
    ow.flush_interval = std::chrono::milliseconds(config.wal_object_flush_interval_ms);
    ow.flush_bytes = config.wal_object_flush_bytes;
    ow.max_in_flight = std::min<uint32_t>(config.wal_iodepth, 64);
    ow.capacity = config.wal_capacity_bytes;
    ow.thread_nice = config.latency_threads_nice;
    so.object_wal = ow;
  }
  so.metadata = *db;
  so.node_id = base::node_id(config.node_id);
  so.log_cache_bytes = config.log_cache_bytes;
  so.block_cache_bytes = config.block_cache_bytes;
  so.upload_interval = std::chrono::milliseconds(config.upload_interval_ms);
  so.upload_threshold_bytes = config.upload_threshold_bytes;
  so.compaction_interval = std::chrono::milliseconds(config.compaction_interval_ms);
  so.retention_interval = std::chrono::milliseconds(config.retention_check_interval_ms);
  so.sweep_interval = std::chrono::milliseconds(config.object_sweep_interval_ms);
  so.sweep_grace = std::chrono::milliseconds(config.object_sweep_grace_ms);
  so.retention_ms = config.log_retention_ms;
  so.retention_bytes = config.log_retention_bytes;
  // NOLINTNEXTLINE(concurrency-mt-unsafe): read once at open, nothing sets the environment
  if (const char* faults = std::getenv("SILT_TEST_WAL_FAULTS"); faults != nullptr) {
    auto parsed = parse_wal_faults(faults);
    if (!parsed) return tl::make_unexpected("SILT_TEST_WAL_FAULTS: " + parsed.error());
    SILT_LOG(warn, "silt: injecting WAL write faults (SILT_TEST_WAL_FAULTS=%s)", faults);
    so.wal.faults = std::make_shared<storage::wal::write_faults>(*parsed);
  }
  auto store = storage::stream_store::open(so, *b->objects_);
  if (!store) return tl::make_unexpected(store.error());
  b->store_ = std::move(*store);

  auto registry = metadata::topic_registry::open(*db);
  if (!registry) return tl::make_unexpected(registry.error());
  b->registry_ = std::move(*registry);
  auto cluster_id = b->registry_->cluster_id(config.cluster_id);
  if (!cluster_id)
    return tl::make_unexpected("cannot store the cluster id in " + (*db)->describe());
  if (!config.cluster_id.empty() && *cluster_id != config.cluster_id) {
    return tl::make_unexpected("cluster.id " + config.cluster_id + " does not match the id " +
                               *cluster_id + " stored in " + (*db)->describe());
  }
  // The streams this broker serves, each taken at its next epoch (Kafka's leader epoch) before
  // it serves a request: those nobody owns, its own, and those of a node whose WAL is this
  // one (the same broker under another node.id: the replay just read their data) or that
  // never registered (a store written before membership). A stream of another broker stays
  // that broker's: taking it would drop what waits in that broker's WAL.
  auto members = b->membership_->registered();
  if (!members) {
    return tl::make_unexpected("cannot read the brokers registered in " + (*db)->describe());
  }
  auto may_take = [&](base::node_id owner) {
    if (owner == base::node_id(-1) || owner == base::node_id(config.node_id)) return true;
    for (const auto& m : *members) {
      if (m.info.node == owner) return m.info.wal_location == mo.self.wal_location;
    }
    return true;
  };
  std::vector<base::stream_id> streams;
  size_t others = 0;
  for (const auto& t : b->registry_->all()) {
    for (const base::stream_id s : t->streams) {
      if (may_take(b->store_->offsets(s).owner)) {
        streams.push_back(s);
      } else {
        ++others;
      }
    }
  }
  if (others > 0) {
    SILT_LOG(info, "silt: %zu partition(s) belong to other brokers and are left to them", others);
  }
  if (auto taken = b->store_->take(streams); !taken) {
    return tl::make_unexpected("cannot take the partitions' streams in " + (*db)->describe());
  }
  b->producers_ =
      std::make_unique<producer_state>(*b->registry_, *b->store_, config.producer_id_expiration_ms);
  b->ctx_ = std::make_unique<context>(b->config_, *cluster_id, *b->store_, *b->registry_,
                                      *b->producers_, b->blocking_);
  for (const auto& t : b->registry_->all()) b->ctx_->refresh(t);
  auto group_store = metadata::group_store::open(*db, base::node_id(config.node_id));
  if (!group_store) return tl::make_unexpected(group_store.error());
  b->group_store_ = std::move(*group_store);
  coordinator::coordinator_options co;
  co.limits.initial_rebalance_delay_ms = config.group_initial_rebalance_delay_ms;
  co.limits.min_session_timeout_ms = config.group_min_session_timeout_ms;
  co.limits.max_session_timeout_ms = config.group_max_session_timeout_ms;
  co.limits.max_size = config.group_max_size;
  co.shards = config.offsets_topic_num_partitions;
  co.offsets_retention_ms = config.offsets_retention_minutes * 60 * 1000;
  co.retention_check_interval_ms = config.offsets_retention_check_interval_ms;
  co.max_metadata_bytes = config.offset_metadata_max_bytes;
  co.commit_timeout_ms = config.offsets_commit_timeout_ms;
  // Not active yet: the controller's first round makes it so on the broker holding the lease.
  auto groups = coordinator::group_coordinator::open(co, *b->group_store_,
                                                     b->blocking_.get_executor(), false);
  if (!groups) return tl::make_unexpected(groups.error() + " in " + (*db)->describe());
  b->groups_ = std::move(*groups);
  b->ctx_->set_groups(b->groups_.get());
  b->ctx_->set_membership(b->membership_.get());
  // Every broker runs for controller; the holder of the lease places streams.
  cluster::controller_options cto;
  cto.self = base::node_id(config.node_id);
  cto.interval = mo.heartbeat_interval;
  cto.lease = mo.session_timeout;
  // Load is reported every tenth heartbeat; a balancing step can follow every second report.
  cto.balance_interval = 2 * mo.load_report_heartbeats * mo.heartbeat_interval;
  // The controller places the group coordinator's shards; every broker takes those placed on
  // it (the first round, before the broker serves, included).
  cto.shards = co.shards;
  cto.on_shards = [p = b.get()](const std::vector<metadata::shard_state>& shards) {
    p->follow_shards(shards);
  };
  // The controller's broker compacts, deletes and sweeps objects for the cluster (from its
  // first round on a single broker).
  b->store_->set_maintains_objects(false);
  cto.on_change = [store = b->store_.get()](bool active) {
    store->set_maintains_objects(active);
    return true;
  };
  cto.on_takeover = [p = b.get()](const std::vector<metadata::wal_takeover>& t) {
    p->take_over(t);
  };
  b->membership_->set_ingest_source([p = b.get()] { return p->store_->take_ingested(); });
  // After a lapse of its lease, the broker reads every stream's owner again before it
  // acknowledges: some may have been taken over meanwhile.
  b->membership_->set_on_rejoin([p = b.get()] {
    return p->store_
        ->refresh_owners(true,
                         [p](const std::vector<base::stream_id>& coming) {
                           for (const base::stream_id s : coming) p->producers_->forget(s);
                         })
        .has_value();
  });
  auto controller = cluster::controller::start(*db, *b->membership_, cto);
  if (!controller) return tl::make_unexpected(controller.error());
  b->controller_ = std::move(*controller);
  // A produce waiting for room in the WAL tries again.
  b->store_->set_room_listener(
      [ctx = b->ctx_.get()] { ctx->waiters.notify(data_waiters::wal_room); });
  // Admin calls on other brokers wait for this one from its first report on (before it, it
  // counts as opening). A change committed after the topics were loaded and before that report
  // was not waited for: the second round, after the report, takes it in before this broker
  // serves.
  b->follow_topics();
  b->follow_topics();
  return b;
}

void broker::start_background(std::chrono::milliseconds period) {
  groups_->start(blocking_.get_executor());
  snapshot_timer_ = std::make_unique<asio::steady_timer>(blocking_.get_executor());
  asio::co_spawn(
      blocking_.get_executor(),
      [this, period]() -> asio::awaitable<void> {
        for (;;) {
          snapshot_timer_->expires_after(period);
          boost::system::error_code ec;
          co_await snapshot_timer_->async_wait(asio::redirect_error(asio::use_awaitable, ec));
          if (ec || closed_) co_return;
          if (auto r = producers_->snapshot(); !r) SILT_LOG(info, "silt: %s", r.error().c_str());
        }
      },
      asio::detached);
  // Topics created, changed or deleted through other brokers appear here within a tenth of a
  // second, and so do streams handed over or placed (one query each while nothing changed).
  topics_timer_ = std::make_unique<asio::steady_timer>(follow_.get_executor());
  asio::co_spawn(
      follow_.get_executor(),
      [this]() -> asio::awaitable<void> {
        for (;;) {
          topics_timer_->expires_after(
              std::min(std::chrono::milliseconds(100),
                       std::chrono::milliseconds(config_.broker_heartbeat_interval_ms)));
          boost::system::error_code ec;
          co_await topics_timer_->async_wait(asio::redirect_error(asio::use_awaitable, ec));
          if (ec || closed_) co_return;
          refresh_topics();
        }
      },
      asio::detached);
}

void broker::refresh_topics() {
  follow_topics();
  follow_owners();
}

void broker::follow_topics() {
  auto changes = registry_->refresh();
  if (!changes) return;  // the next round tries again

  // (forget() leaves a topic created again under the name.)
  for (const auto& t : changes->removed) {
    ctx_->forget(t);
    // The groups coordinated here forget its offsets too (the deleting broker removed them from
    // the store).
    groups_->forget_topic(t->name, false);
  }
  if (!changes->removed.empty()) base::release_free_memory();
  std::vector<base::stream_id> fresh;
  fresh.swap(unsettled_);
  for (const auto& t : changes->changed) {
    const auto before = ctx_->topic(t->name);
    for (const base::stream_id s : t->streams) {
      const bool known = before && before->info->id == t->id &&
                         std::find(before->info->streams.begin(), before->info->streams.end(), s) !=
                             before->info->streams.end();
      if (!known) fresh.push_back(s);
    }
  }
  if (!fresh.empty()) {
    auto unsettled = store_->learn(fresh);
    if (!unsettled) {
      unsettled_ = std::move(fresh);  // all of them again next round
    } else {
      unsettled_ = std::move(*unsettled);
    }
  }
  for (const auto& t : changes->changed) (void)ctx_->refresh(t);
  // Every change up to changes->version is served here now, unless a new stream is not yet
  // taken by the broker that created it (served by nobody: Metadata would answer
  // LEADER_NOT_AVAILABLE for it). That is a moment, between the creation's transaction and its
  // take; a stream left untaken by a creator that failed is waited for at most a session
  // timeout, so that admin calls do not wait on it for ever.
  const auto now = std::chrono::steady_clock::now();
  if (unsettled_.empty()) {
    unsettled_since_.reset();
  } else if (!unsettled_since_) {
    unsettled_since_ = now;
  }
  if (!unsettled_since_ ||
      now - *unsettled_since_ >= std::chrono::milliseconds(config_.broker_session_timeout_ms)) {
    membership_->report_topics_applied(changes->version);
  }
}

void broker::follow_owners() {
  // New owners and epochs of other brokers' streams (a restart, a take, a handover).
  // Producer state of a stream another broker served is read again on its next use (dropped
  // before the stream takes appends here).
  auto adopted = store_->refresh_owners(false, [this](const std::vector<base::stream_id>& coming) {
    for (const base::stream_id s : coming) producers_->forget(s);
  });
  if (!adopted) return;
  if (!adopted->empty()) {
    SILT_LOG(info, "silt: cluster: took over %zu partition(s) handed to node %d", adopted->size(),
             config_.node_id);
  }
  const base::node_id self(config_.node_id);
  std::vector<base::stream_id> takes;
  std::map<base::stream_id, base::node_id> to;  // released to other brokers
  for (const auto& m : store_->moves()) {
    if (m.target == self) {
      takes.push_back(m.stream_id);
    } else {
      to[m.stream_id] = m.target;
    }
  }
  if (!takes.empty()) {
    // Producer state is read again on first use (another broker may have served these).
    for (const base::stream_id s : takes) producers_->forget(s);
    if (auto r = store_->take(takes); !r) {
      SILT_LOG(warn, "silt: cluster: cannot take %zu partition(s) placed here: %s", takes.size(),
               std::string(storage::stream_error_name(r.error())).c_str());
    }
  }
  if (to.empty() || !membership_->can_acknowledge()) return;
  // One release at a time: what it leaves is seen again by a later round.
  if (releasing_.exchange(true)) return;
  asio::post(moves_, [this, to = std::move(to)] {
    if (!closed_) {
      auto handed = release(to);
      if (!handed) {
        SILT_LOG(warn, "silt: cluster: cannot hand over %zu partition(s) yet: %s", to.size(),
                 std::string(storage::stream_error_name(handed.error())).c_str());
      } else if (*handed > 0) {
        SILT_LOG(info, "silt: cluster: handed %zu partition(s) to other brokers", *handed);
      }
    }
    releasing_.store(false);
  });
}

tl::expected<size_t, storage::stream_error> broker::release(
    const std::map<base::stream_id, base::node_id>& to) {
  std::vector<base::stream_id> streams;
  streams.reserve(to.size());
  for (const auto& [s, node] : to) streams.push_back(s);
  // Appends stop, the WAL's data of these streams is uploaded and committed; then their
  // producer state is stored, and each is handed over at its next epoch.
  auto ready = store_->prepare_release(streams, std::chrono::seconds(5));
  if (!ready) return tl::make_unexpected(ready.error());
  if (ready->empty()) return size_t{0};
  if (auto r = producers_->snapshot(); !r) SILT_LOG(info, "silt: %s", r.error().c_str());
  size_t handed = 0;
  for (const base::stream_id s : *ready) {
    if (store_->handover(s, to.at(s))) {
      producers_->forget(s);
      ++handed;
    }
  }
  // Clients waiting on this broker learn of the new leader at once.
  ctx_->waiters.notify_all();
  return handed;
}

void broker::take_over(const std::vector<metadata::wal_takeover>& takeovers) {
  if (taking_over_.exchange(true)) return;  // one run at a time; the next round tries again
  std::vector<storage::stream_store::dead_wal> from;
  from.reserve(takeovers.size());
  for (const auto& t : takeovers) from.push_back({t.node, t.wal_location});
  asio::post(moves_, [this, from = std::move(from)] {
    if (!closed_) {
      // Producer state is read again before the streams take appends: the snapshot and the
      // batches after it, those the dead WAL held included.
      auto taken = store_->take_over(from, std::chrono::seconds(10),
                                     [this](const std::vector<base::stream_id>& coming) {
                                       for (const base::stream_id s : coming) producers_->forget(s);
                                     });
      if (taken) {
        ctx_->waiters.notify_all();
        takeover_failures_ = 0;
      } else if (takeover_failures_++ % 20 == 0) {
        SILT_LOG(warn, "silt: cluster: taking over a dead broker's WAL failed: %s",
                 taken.error().c_str());
      }
    }
    taking_over_.store(false);
  });
}

void broker::follow_shards(const std::vector<metadata::shard_state>& shards) {
  const base::node_id self(config_.node_id);
  std::map<int32_t, base::leader_epoch> held;
  for (const auto& [shard, epoch] : groups_->held()) held.emplace(shard, epoch);
  std::vector<int32_t> routes(
      static_cast<size_t>(std::max(config_.offsets_topic_num_partitions, 1)), -1);
  std::vector<int32_t> take;
  std::vector<int32_t> drop;
  const bool may_take = !closed_ && membership_->can_acknowledge();
  for (const auto& s : shards) {
    if (s.shard < 0 || static_cast<size_t>(s.shard) >= routes.size()) continue;
    // Clients are sent where the shard is placed (its target takes it within a round).
    const base::node_id at = s.target != base::node_id(-1) ? s.target : s.owner;
    routes[static_cast<size_t>(s.shard)] = at.value();
    const auto h = held.find(s.shard);
    if (h != held.end()) {
      // Taken by another broker meanwhile, or placed elsewhere: its groups are not this one's.
      // (A lease that lapsed for a moment drops nothing: writes are refused meanwhile, and the
      // controller places the shards elsewhere if the lapse lasts.)
      if (s.owner != self || s.epoch != h->second || s.target != self || closed_) {
        drop.push_back(s.shard);
      }
    } else if (s.target == self && may_take) {
      take.push_back(s.shard);
    }
  }
  groups_->set_routes(std::move(routes));
  // Another broker's groups make __consumer_offsets exist here too.
  groups_->note_offsets_topic_if_used();
  if (!drop.empty()) {
    groups_->drop_shards(drop);
    SILT_LOG(info, "silt: cluster: no longer coordinating %zu group shard(s)", drop.size());
  }
  if (!take.empty()) {
    if (auto r = groups_->take_shards(take); !r) {
      SILT_LOG(warn, "silt: cluster: cannot take %zu group coordinator shard(s): %s", take.size(),
               r.error().c_str());
    } else {
      SILT_LOG(info, "silt: cluster: coordinating %zu more group shard(s)", take.size());
    }
  }
}

void broker::hand_over_partitions() {
  if (!membership_ || !membership_->can_acknowledge()) return;
  // The controller gives this broker nothing from now on, and no handover reaches it after
  // this: those that did are seen by reading the owners again.
  membership_->drain();
  // Consumers reading here what other brokers own go back to the owners, those waiting in a
  // fetch at once, the others with their next fetch: within a fetch's longest wait (Kafka's
  // default fetch.max.wait.ms, librdkafka's fetch.wait.max.ms: 500 ms), before this returns.
  const auto leaving = std::chrono::steady_clock::now();
  if (ctx_->reads_near_client()) {
    ctx_->leaving = true;
    ctx_->waiters.notify_all();
  }
  hand_over_owned();
  if (ctx_->reads_near_client()) std::this_thread::sleep_until(leaving + std::chrono::seconds(1));
}

void broker::hand_over_owned() {
  const base::node_id self(config_.node_id);
  (void)store_->refresh_owners(false, [this](const std::vector<base::stream_id>& coming) {
    for (const base::stream_id s : coming) producers_->forget(s);
  });
  std::vector<base::node_id> others;
  for (const auto& b : *membership_->brokers()) {
    if (b.info.node != self && !b.draining) others.push_back(b.info.node);
  }
  if (others.empty()) return;
  // Another broker takes the controller role; others take the group coordinator's shards (a
  // draining broker's are placed elsewhere).
  if (controller_) controller_->stop();
  groups_->deactivate();
  // Round-robin over the others.
  std::map<base::stream_id, base::node_id> to;
  for (const auto& t : registry_->all()) {
    for (const base::stream_id s : t->streams) {
      const auto o = store_->offsets(s);
      if (o.owner == self && !o.fenced) to[s] = others[to.size() % others.size()];
    }
  }
  if (to.empty()) return;
  // After the release under way, if any (bounded: a release waits at most 5 s for uploads).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(15);
  while (releasing_.exchange(true) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  auto handed = release(to);
  releasing_.store(false);
  if (!handed) {
    SILT_LOG(warn, "silt: cluster: cannot hand the partitions over before stopping: %s",
             std::string(storage::stream_error_name(handed.error())).c_str());
    return;
  }
  SILT_LOG(info,
           "silt: cluster: handed %zu of %zu partition(s) to %zu other broker(s) before "
           "stopping",
           *handed, to.size(), others.size());
}

void broker::begin_shutdown() {
  ctx_->stopping = true;
  // Joins and syncs waiting for other members are answered (NOT_COORDINATOR).
  groups_->close();
  ctx_->waiters.notify_all();
  // Nothing waits on an unreachable object store at shutdown: cold reads in progress fail
  // (the fetch answers KAFKA_STORAGE_ERROR) and so does an upload (its data stays in the WAL
  // for the next start).
  objects_->cancel();
}

void broker::close() {
  if (closed_ || !store_) return;
  closed_ = true;
  // Its deadline loop stops, so that the blocking pool can run dry.
  if (groups_) groups_->close();
  if (snapshot_timer_) {
    asio::post(blocking_.get_executor(), [this] { snapshot_timer_->cancel(); });
  }
  if (topics_timer_) {
    asio::post(follow_.get_executor(), [this] { topics_timer_->cancel(); });
  }
  if (controller_) controller_->stop();
  objects_->cancel();
  // The follow loop ends, and releases and takeovers under way end (their uploads fail
  // fast now), before the store closes under them.
  follow_.join();
  moves_.join();
  store_->close();
  // (A broker whose open() failed half way has no producer state yet.)
  if (producers_) {
    if (auto r = producers_->snapshot(); !r) SILT_LOG(info, "silt: %s", r.error().c_str());
  }
  // Last: the lease ends once nothing more is committed under it.
  if (membership_) membership_->stop();
}

asio::awaitable<net::response> broker::handle(net::request req) {
  const int16_t key = req.header.header.request_api_key;
  const int16_t version = req.header.header.request_api_version;
  const api_range* range = find_supported(key);
  if (key == protocol::api_versions_request::api_key &&
      (range == nullptr || version > range->max_version)) {
    // A client newer than the broker: answer at v0 with UNSUPPORTED_VERSION and the
    // ApiVersions range, so that it retries at a version both know (KIP-511; Kafka lists
    // only ApiVersions itself here).
    protocol::api_versions_response resp;
    resp.error_code = static_cast<int16_t>(protocol::error_code::unsupported_version);
    if (range != nullptr)
      resp.api_keys.push_back({key, range->min_version, range->max_version, {}});
    auto h = req.header;
    h.header.request_api_version = 0;
    co_return encode_response(h, resp);
  }
  if (range == nullptr || version < range->min_version || version > range->max_version) {
    co_return net::response::close_connection();
  }
  context& c = *ctx_;
  switch (key) {
    case protocol::produce_request::api_key: {
      const int16_t v = version;
      protocol::produce_request pr;
      protocol::reader r(req.body());
      pr.decode(r, v);
      if (!r.ok()) co_return net::response::close_connection();
      const bool acks0 = pr.acks == 0;
      auto resp = co_await handle_produce(c, req, pr);
      if (acks0) {
        // No answer for acks=0; an error closes the connection so the client notices.
        for (const auto& t : resp.responses) {
          for (const auto& p : t.partition_responses) {
            if (p.error_code != 0) co_return net::response::close_connection();
          }
        }
        co_return net::response::none();
      }
      co_return encode_response(req.header, resp);
    }
    case protocol::fetch_request::api_key: {
      protocol::fetch_request fr;
      protocol::reader r(req.body());
      fr.decode(r, version);
      if (!r.ok()) co_return net::response::close_connection();
      auto result = co_await handle_fetch(c, req, fr);
      auto out = encode_response(req.header, result.response, 4096);
      out.owners = std::move(result.owners);
      co_return out;
    }
    case protocol::api_versions_request::api_key:
      co_return co_await serve<protocol::api_versions_request>(c, req, handle_api_versions);
    case protocol::metadata_request::api_key:
      co_return co_await serve<protocol::metadata_request>(c, req, handle_metadata);
    case protocol::list_offsets_request::api_key:
      co_return co_await serve<protocol::list_offsets_request>(c, req, handle_list_offsets);
    case protocol::init_producer_id_request::api_key:
      co_return co_await serve_blocking<protocol::init_producer_id_request>(
          c, req, handle_init_producer_id);
    case protocol::offset_for_leader_epoch_request::api_key:
      co_return co_await serve_blocking<protocol::offset_for_leader_epoch_request>(
          c, req, handle_offset_for_leader_epoch);
    case protocol::delete_records_request::api_key:
      co_return co_await serve_blocking<protocol::delete_records_request>(c, req,
                                                                          handle_delete_records);
    case protocol::create_topics_request::api_key:
      co_return co_await serve_blocking<protocol::create_topics_request>(c, req,
                                                                         handle_create_topics);
    case protocol::delete_topics_request::api_key:
      co_return co_await serve_blocking<protocol::delete_topics_request>(c, req,
                                                                         handle_delete_topics);
    case protocol::create_partitions_request::api_key:
      co_return co_await serve_blocking<protocol::create_partitions_request>(
          c, req, handle_create_partitions);
    case protocol::describe_configs_request::api_key:
      co_return co_await serve<protocol::describe_configs_request>(c, req, handle_describe_configs);
    case protocol::alter_configs_request::api_key:
      co_return co_await serve_blocking<protocol::alter_configs_request>(c, req,
                                                                         handle_alter_configs);
    case protocol::incremental_alter_configs_request::api_key:
      co_return co_await serve_blocking<protocol::incremental_alter_configs_request>(
          c, req, handle_incremental_alter_configs);
    case protocol::alter_partition_reassignments_request::api_key:
      co_return co_await serve_blocking<protocol::alter_partition_reassignments_request>(
          c, req, handle_alter_partition_reassignments);
    case protocol::list_partition_reassignments_request::api_key:
      co_return co_await serve<protocol::list_partition_reassignments_request>(
          c, req, handle_list_partition_reassignments);
    case protocol::describe_cluster_request::api_key:
      co_return co_await serve<protocol::describe_cluster_request>(c, req, handle_describe_cluster);
    case protocol::describe_topic_partitions_request::api_key:
      co_return co_await serve<protocol::describe_topic_partitions_request>(
          c, req, handle_describe_topic_partitions);
    case protocol::offset_commit_request::api_key:
      co_return co_await serve<protocol::offset_commit_request>(c, req, handle_offset_commit);
    case protocol::offset_fetch_request::api_key:
      co_return co_await serve<protocol::offset_fetch_request>(c, req, handle_offset_fetch);
    case protocol::find_coordinator_request::api_key:
      co_return co_await serve<protocol::find_coordinator_request>(c, req, handle_find_coordinator);
    case protocol::join_group_request::api_key:
      co_return co_await serve<protocol::join_group_request>(c, req, handle_join_group);
    case protocol::heartbeat_request::api_key:
      co_return co_await serve<protocol::heartbeat_request>(c, req, handle_heartbeat);
    case protocol::leave_group_request::api_key:
      co_return co_await serve<protocol::leave_group_request>(c, req, handle_leave_group);
    case protocol::sync_group_request::api_key:
      co_return co_await serve<protocol::sync_group_request>(c, req, handle_sync_group);
    case protocol::describe_groups_request::api_key:
      co_return co_await serve<protocol::describe_groups_request>(c, req, handle_describe_groups);
    case protocol::list_groups_request::api_key:
      co_return co_await serve<protocol::list_groups_request>(c, req, handle_list_groups);
    case protocol::delete_groups_request::api_key:
      co_return co_await serve<protocol::delete_groups_request>(c, req, handle_delete_groups);
    case protocol::offset_delete_request::api_key:
      co_return co_await serve<protocol::offset_delete_request>(c, req, handle_offset_delete);
    case protocol::consumer_group_heartbeat_request::api_key:
      co_return co_await serve<protocol::consumer_group_heartbeat_request>(
          c, req, handle_consumer_group_heartbeat);
    case protocol::consumer_group_describe_request::api_key:
      co_return co_await serve<protocol::consumer_group_describe_request>(
          c, req, handle_consumer_group_describe);
    default:
      co_return net::response::close_connection();
  }
}

}  // namespace silt::handlers
