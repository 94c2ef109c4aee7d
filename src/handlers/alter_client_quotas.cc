// AlterClientQuotas (key 49, v0-1): sets and removes client quotas (kafka-configs.sh --alter
// --entity-type users/clients --add-config producer_byte_rate=...), checked as Kafka 4's
// controller checks them (ClientQuotaControlManager), kept in the quota store and applied by
// this broker at once (every other broker within its next follow round).
//
// Without ALTER_CONFIGS on CLUSTER (ACLs on), every entry is CLUSTER_AUTHORIZATION_FAILED and
// nothing changes. Each entry is checked alone, an error (INVALID_REQUEST unless said) refusing
// that entry's changes only:
// - the entity: none ("Invalid empty client quota entity"), a type named twice, a type other
//   than user, client-id and ip ("Unhandled client quota entity type: X"), an empty name ("Empty
//   user not supported"); an entity named by an earlier entry ("Ignoring duplicate entity").
//   Silt keeps no IP quotas (connection_creation_rate): an ip entity is refused with a message
//   saying so. A name that is not UTF-8 text without NUL cannot be stored and is refused too.
// - each key: named twice ("Duplicate quota key"), unknown ("Invalid configuration key K");
//   controller_mutation_rate, which Kafka takes, is refused (Silt does not throttle topic
//   creations and deletions, KIP-599); a value not above 0 ("Quota K must be greater than 0");
//   producer_byte_rate and consumer_byte_rate are longs ("K cannot be a fractional value.").
//   Removing a key the entity does not have changes nothing.
// With validate_only nothing is stored. The changes of all valid entries are one transaction;
// a store failure is UNKNOWN_SERVER_ERROR for each of them. Runs on the blocking pool.
#include <cmath>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "base/log.h"
#include "base/utf8.h"
#include "handlers/admin_util.h"
#include "handlers/handlers.h"

namespace silt::handlers {

namespace {

using admin::api_error;
using metadata::quota_change;
using metadata::quota_entity;
using metadata::quota_entity_part;
using protocol::alter_client_quotas_request;
using protocol::alter_client_quotas_response;
using protocol::error_code;

api_error invalid(std::string message) {
  return {error_code::invalid_request, std::move(message)};
}

// Kafka's ClientQuotaEntity.toString, for messages.
std::string describe(const alter_client_quotas_request::EntryData& e) {
  std::string out = "ClientQuotaEntity(entries={";
  for (size_t i = 0; i < e.entity.size(); ++i) {
    if (i > 0) out += ", ";
    out += e.entity[i].entity_type;
    out += '=';
    out += e.entity[i].entity_name.value_or("null");
  }
  return out + "})";
}

// The entity of an entry, or why it is refused (Kafka's validateEntity and
// configKeysForEntityType).
tl::expected<quota_entity, api_error> entity_of(const alter_client_quotas_request::EntryData& e) {
  if (e.entity.empty()) return tl::unexpected(invalid("Invalid empty client quota entity"));
  quota_entity out;
  std::set<std::string> types;
  bool ip = false;
  for (const auto& d : e.entity) {
    if (!types.insert(d.entity_type).second) {
      return tl::unexpected(
          invalid("Invalid empty client quota entity, duplicate entity entry " + d.entity_type));
    }
    quota_entity_part* part = nullptr;
    if (d.entity_type == "user") {
      part = &out.user;
    } else if (d.entity_type == "client-id") {
      part = &out.client_id;
    } else if (d.entity_type == "ip") {
      ip = true;
    } else {
      return tl::unexpected(invalid("Unhandled client quota entity type: " + d.entity_type));
    }
    if (d.entity_name && d.entity_name->empty()) {
      return tl::unexpected(invalid("Empty " + d.entity_type + " not supported"));
    }
    if (d.entity_name && !base::is_storable_text(*d.entity_name)) {
      return tl::unexpected(
          invalid("The " + d.entity_type + " name must be UTF-8 text without NUL characters"));
    }
    if (part != nullptr) {
      *part = d.entity_name ? quota_entity_part::named(*d.entity_name)
                            : quota_entity_part::default_name();
    }
  }
  if (ip) {
    if (out.user.present() || out.client_id.present()) {
      return tl::unexpected(
          invalid("Invalid quota entity combination, IP entity shouldnot be combined with User or "
                  "ClientId"));
    }
    return tl::unexpected(
        invalid("IP quotas (connection_creation_rate) are not supported by this broker"));
  }
  return out;
}

// Kafka's validateQuotaKeyValue for user and client-id entities.
api_error check_value(const std::string& key, double value) {
  const bool is_long = key == "producer_byte_rate" || key == "consumer_byte_rate";
  if (key == "controller_mutation_rate") {
    return invalid(
        "controller_mutation_rate is not supported by this broker: it does not throttle topic "
        "and partition creations and deletions (KIP-599)");
  }
  if (!is_long && key != "request_percentage") return invalid("Invalid configuration key " + key);
  if (!(value > 0.0)) return invalid("Quota " + key + " must be greater than 0");
  if (is_long) {
    if (value > 9.223372036854775807e18) {
      return invalid("Proposed value for " + key + " is too large for a LONG.");
    }
    if (std::abs(std::fmod(value, 1.0)) > 1e-6) {
      return invalid(key + " cannot be a fractional value.");
    }
  }
  return {};
}

}  // namespace

asio::awaitable<alter_client_quotas_response> handle_alter_client_quotas(
    context& ctx, const net::request& raw, const alter_client_quotas_request& req) {
  alter_client_quotas_response resp;
  auto add = [&resp](const alter_client_quotas_request::EntryData& e, const api_error& err) {
    auto& out = resp.entries.emplace_back();
    out.error_code = err.code;
    out.error_message = err.ok() ? std::nullopt : err.message;
    for (const auto& d : e.entity) out.entity.push_back({d.entity_type, d.entity_name, {}});
  };
  const access acl(ctx, raw);
  if (!acl.cluster(security::acl_operation::alter_configs)) {
    for (const auto& e : req.entries) {
      add(e, admin::error_of(error_code::cluster_authorization_failed));
    }
    co_return resp;
  }
  base::lock_guard change(ctx.quotas.change_mu);
  auto current = ctx.quotas.snapshot();
  std::vector<quota_change> changes;
  std::vector<size_t> applied;  // the entries whose changes are in `changes`
  std::vector<api_error> results(req.entries.size());
  std::set<quota_entity> seen;
  for (size_t i = 0; i < req.entries.size(); ++i) {
    const auto& e = req.entries[i];
    auto entity = entity_of(e);
    if (!entity) {
      results[i] = entity.error();
      continue;
    }
    if (!seen.insert(*entity).second) {
      results[i] = invalid("Ignoring duplicate entity " + describe(e));
      continue;
    }
    std::set<std::string> keys;
    std::vector<quota_change> mine;
    const auto have = current.find(*entity);
    for (const auto& op : e.ops) {
      if (!keys.insert(op.key).second) {
        results[i] = invalid("Duplicate quota key " + op.key +
                             " not updating quota for this entity " + describe(e));
        break;
      }
      if (op.remove) {
        if (have != current.end() && have->second.contains(op.key)) {
          mine.push_back({*entity, op.key, std::nullopt});
        }
        continue;
      }
      if (auto bad = check_value(op.key, op.value); !bad.ok()) {
        results[i] = std::move(bad);
        break;
      }
      mine.push_back({*entity, op.key, op.value});
    }
    if (!results[i].ok()) continue;
    changes.insert(changes.end(), mine.begin(), mine.end());
    applied.push_back(i);
  }
  if (!req.validate_only && !changes.empty()) {
    bool stored = true;
    if (ctx.quota_store != nullptr) {
      if (auto done = ctx.quota_store->alter(changes); !done) {
        SILT_LOG(warn, "silt: AlterClientQuotas: %s", done.error().c_str());
        stored = false;
        for (const size_t i : applied)
          results[i] = admin::error_of(error_code::unknown_server_error);
      }
    }
    if (stored) {
      for (const auto& c : changes) {
        if (c.value) {
          current[c.entity][c.key] = *c.value;
          continue;
        }
        auto it = current.find(c.entity);
        if (it == current.end()) continue;
        it->second.erase(c.key);
        if (it->second.empty()) current.erase(it);
      }
      ctx.quotas.replace(current);
    }
  }
  for (size_t i = 0; i < req.entries.size(); ++i) add(req.entries[i], results[i]);
  co_return resp;
}

}  // namespace silt::handlers
