#include "app/node.h"

#include <cerrno>
#include <cstdlib>
#include <filesystem>
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

#include "app/test_faults.h"
#include "base/log.h"

namespace silt::app {

namespace asio = boost::asio;

namespace {

namespace fs = std::filesystem;

// How long open() waits for the object store's marker before serving from the WAL without the
// store, and how often the marker is tried again meanwhile.
constexpr std::chrono::milliseconds claim_wait{10000};
constexpr std::chrono::milliseconds claim_retry_interval{5000};

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

node::node(const config::broker_config& config)
    : config_(config), blocking_(std::max<uint32_t>(1, config.num_io_threads)) {}

node::~node() {
  try {
    close();
    // (A broker whose open() failed half way: an attempt in progress gives up.)
    if (claim_) {
      objects_->cancel();
      claim_->stop();
    }
    // Its callbacks use the follower and the group coordinator, destroyed before it.
    controller_.reset();
    blocking_.join();
    if (wal_lock_fd_ >= 0) ::close(wal_lock_fd_);
  } catch (const std::exception& e) {
    SILT_LOG(warn, "silt: closing the broker failed: %s", e.what());
  }
}

tl::expected<std::unique_ptr<node>, std::string> node::open(const config::broker_config& config) {
  std::unique_ptr<node> b(new node(config));
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
  auto gate = std::make_unique<storage::gated_store>(std::move(metered));
  b->gated_objects_ = gate.get();
  b->objects_ = std::move(gate);

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
  // The object store is this cluster's, or nothing touches it: before the broker registers,
  // opens its WAL (which may be in the store) or takes anything, its store's marker must name
  // its cluster (storage/cluster_claim.h). Another cluster's store stops it here. A store that
  // cannot be read holds it up for at most claim_wait; then, as when the store is down, it
  // serves from its WAL, with every call to the store failing until the marker is read. A WAL in
  // the store cannot wait: the broker does not start, as when that WAL cannot be read.
  b->metadata_description_ = (*db)->describe();
  b->claim_ = std::make_unique<storage::cluster_claim>(*b->metered_objects_, *b->gated_objects_,
                                                       *cluster_id, claim_retry_interval);
  const auto claimed = b->claim_->start(object_wal ? std::nullopt : std::optional(claim_wait));
  switch (claimed.state) {
    case storage::cluster_claim::state::claimed:
      break;
    case storage::cluster_claim::state::refused:
      return tl::make_unexpected(claimed.message + " (cluster id stored in " +
                                 b->metadata_description_ + ")");
    case storage::cluster_claim::state::pending:
      if (object_wal) {
        return tl::make_unexpected(claimed.message +
                                   ", and the WAL is in that store (wal.type=object)");
      }
      SILT_LOG(warn,
               "silt: %s; serving from the WAL, with nothing read from or written to the object "
               "store until its marker is read (tried again every %lld s)",
               claimed.message.c_str(),
               static_cast<long long>(
                   std::chrono::duration_cast<std::chrono::seconds>(claim_retry_interval).count()));
      break;
  }

  // Membership: registered (at a new broker epoch) before the WAL is opened or anything taken;
  // while another broker is taking this node's WAL over, start() waits for it to finish.
  cluster::membership_options mo;
  mo.self.node = base::node_id(config.node_id);
  mo.self.host = config::advertised_endpoint(config).host;
  mo.self.port = config::advertised_endpoint(config).port;
  mo.self.rack = config.broker_rack;
  for (const auto& e : config.advertised_listeners) {
    mo.self.listeners.push_back({e.listener_name, e.host, e.port});
  }
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
  so.cleaner.enabled = config.log_cleaner_enable;
  so.cleaner.threads = static_cast<uint32_t>(config.log_cleaner_threads);
  so.cleaner.dedupe_buffer_bytes = static_cast<size_t>(config.log_cleaner_dedupe_buffer_size);
  so.cleaner.load_factor = config.log_cleaner_io_buffer_load_factor;
  so.cleaner.io_max_bytes_per_second = config.log_cleaner_io_max_bytes_per_second;
  so.cleaner.backoff = std::chrono::milliseconds(config.log_cleaner_backoff_ms);
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
  b->producers_ = std::make_unique<handlers::producer_state>(*b->registry_, *b->store_,
                                                             config.producer_id_expiration_ms);
  b->ctx_ = std::make_unique<handlers::context>(b->config_, *cluster_id, *b->store_, *b->registry_,
                                                *b->producers_, b->blocking_);
  b->dispatcher_ = std::make_unique<handlers::dispatcher>(*b->ctx_);
  auto credentials = metadata::credential_store::open(*db);
  if (!credentials) return tl::make_unexpected(credentials.error());
  b->credentials_ = std::move(*credentials);
  b->ctx_->set_credentials(b->credentials_.get());
  auto quotas = metadata::quota_store::open(*db);
  if (!quotas) return tl::make_unexpected(quotas.error() + " in " + (*db)->describe());
  auto stored_quotas = (*quotas)->load();
  if (!stored_quotas) {
    return tl::make_unexpected(stored_quotas.error() + " in " + (*db)->describe());
  }
  b->quota_store_ = std::move(*quotas);
  b->ctx_->quotas.replace(*stored_quotas);
  b->ctx_->quota_store = b->quota_store_.get();
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
  if (!config.authorizer_class_name.empty()) {
    auto super_users = security::parse_super_users(config.super_users);
    if (!super_users) return tl::make_unexpected("super.users: " + super_users.error());
    auto acls = metadata::acl_store::open(*db);
    if (!acls) return tl::make_unexpected(acls.error() + " in " + (*db)->describe());
    auto stored = (*acls)->load();
    if (!stored) return tl::make_unexpected(stored.error() + " in " + (*db)->describe());
    b->acl_store_ = std::move(*acls);
    b->ctx_->authorizer = std::make_shared<security::authorizer>(
        security::authorizer_options{
            .super_users = std::move(*super_users),
            .allow_everyone_if_no_acl_found = config.allow_everyone_if_no_acl_found},
        std::move(*stored));
    b->ctx_->acl_store = b->acl_store_.get();
  }
  cluster::follower_options fo;
  fo.self = base::node_id(config.node_id);
  fo.session_timeout = std::chrono::milliseconds(config.broker_session_timeout_ms);
  fo.shards = config.offsets_topic_num_partitions;
  cluster::follower_hooks hooks;
  hooks.forget_topic = [ctx = b->ctx_.get()](const metadata::topic_ptr& t) { ctx->forget(t); };
  hooks.refresh_topic = [ctx = b->ctx_.get()](const metadata::topic_ptr& t) {
    (void)ctx->refresh(t);
  };
  hooks.served_topic = [ctx = b->ctx_.get()](std::string_view name) -> metadata::topic_ptr {
    const auto t = ctx->topic(name);
    return t ? t->info : nullptr;
  };
  hooks.forget_producer_state = [producers = b->producers_.get()](base::stream_id s) {
    producers->forget(s);
  };
  hooks.snapshot_producer_state = [producers = b->producers_.get()] {
    return producers->snapshot();
  };
  hooks.wake_waiters = [ctx = b->ctx_.get()] { ctx->waiters.notify_all(); };
  b->follower_ = std::make_unique<cluster::follower>(fo, *b->store_, *b->registry_, *b->membership_,
                                                     *b->groups_, std::move(hooks));
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
  cto.on_shards = [f = b->follower_.get()](const std::vector<metadata::shard_state>& shards) {
    f->follow_shards(shards);
  };
  // The controller's broker compacts, deletes and sweeps objects for the cluster (from its
  // first round on a single broker).
  b->store_->set_maintains_objects(false);
  cto.on_change = [store = b->store_.get()](bool active) {
    store->set_maintains_objects(active);
    return true;
  };
  cto.on_takeover = [f = b->follower_.get()](const std::vector<metadata::wal_takeover>& t) {
    f->take_over(t);
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
  b->follower_->set_controller(b->controller_.get());
  // A produce waiting for room in the WAL tries again.
  b->store_->set_room_listener(
      [ctx = b->ctx_.get()] { ctx->waiters.notify(handlers::data_waiters::wal_room); });
  // Admin calls on other brokers wait for this one from its first report on (before it, it
  // counts as opening). A change committed after the topics were loaded and before that report
  // was not waited for: the second round, after the report, takes it in before this broker
  // serves.
  b->follower_->follow_topics();
  b->follower_->follow_topics();
  return b;
}

void node::on_store_refused(std::function<void(const std::string&)> callback) {
  claim_->on_refused(
      [callback = std::move(callback), where = metadata_description_](const std::string& m) {
        callback(m + " (cluster id stored in " + where + ")");
      });
}

void node::start_background(std::chrono::milliseconds period) {
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
  // second, and so do streams handed over or placed and users' credentials (one query each
  // while nothing changed).
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
          follower_->follow();
          // Users' credentials changed through other brokers. A failure is the database's
          // (logged by it): the next round tries again.
          (void)credentials_->refresh();
          follow_acls();
          follow_quotas();
        }
      },
      asio::detached);
}

void node::follow_quotas() {
  base::lock_guard change(ctx_->quotas.change_mu);
  auto changed = quota_store_->refresh();
  if (!changed) {
    SILT_LOG(info, "silt: %s", changed.error().c_str());  // the next round tries again
    return;
  }
  if (*changed) ctx_->quotas.replace(**changed);
}

void node::follow_acls() {
  if (!acl_store_) return;
  if (auto ok = acl_store_->follow(*ctx_->authorizer); !ok) {
    SILT_LOG(info, "silt: %s", ok.error().c_str());  // the next round tries again
  }
}

void node::hand_over_partitions() {
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
  follower_->hand_over_owned();
  if (ctx_->reads_near_client()) std::this_thread::sleep_until(leaving + std::chrono::seconds(1));
}

void node::begin_shutdown() {
  ctx_->stopping = true;
  // Joins and syncs waiting for other members are answered (NOT_COORDINATOR).
  groups_->close();
  ctx_->waiters.notify_all();
  // Nothing waits on an unreachable object store at shutdown: cold reads in progress fail
  // (the fetch answers KAFKA_STORAGE_ERROR) and so does an upload (its data stays in the WAL
  // for the next start).
  objects_->cancel();
}

void node::close() {
  if (closed_ || !store_) return;
  closed_ = true;
  if (follower_) follower_->close();
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
  claim_->stop();
  // The follow loop ends, and releases and takeovers under way end (their uploads fail
  // fast now), before the store closes under them.
  follow_.join();
  if (follower_) follower_->join();
  store_->close();
  // (A broker whose open() failed half way has no producer state yet.)
  if (producers_) {
    if (auto r = producers_->snapshot(); !r) SILT_LOG(info, "silt: %s", r.error().c_str());
  }
  // Last: the lease ends once nothing more is committed under it.
  if (membership_) membership_->stop();
}

}  // namespace silt::app
