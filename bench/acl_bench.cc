// What a request's ACL checks cost on its network thread: taking the snapshot of the ACLs (once
// per request, handlers/access.h) and one authorize() (a Produce request's check of WRITE on
// its topic), with 0, 1,000 and 10,000 ACLs present, a share of them on the topic itself and on
// prefixes of its name. Printed, never asserted. Run: build/bench/acl_bench
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include "security/acl.h"
#include "security/authorizer.h"

namespace {

using namespace silt::security;

constexpr const char* kTopic = "perf";

acl_binding make(acl_resource_type type, std::string name, acl_pattern_type pattern,
                 std::string principal, acl_operation op, acl_permission_type permission) {
  return acl_binding{.resource_type = type,
                     .resource_name = std::move(name),
                     .pattern_type = pattern,
                     .principal = std::move(principal),
                     .host = "*",
                     .operation = op,
                     .permission_type = permission};
}

// `n` ACLs as bench/acl_overhead.py makes them: those that allow User:ANONYMOUS to write and
// read topic "perf" and read groups "perf-consumer*", then others in four shares: on "perf"
// itself, PREFIXED (some prefixes of "perf"), other topics, groups; one in ten a DENY.
std::vector<acl_binding> bindings(int n) {
  std::vector<acl_binding> out;
  if (n == 0) return out;
  const std::string anonymous = "User:ANONYMOUS";
  out.push_back(make(acl_resource_type::topic, kTopic, acl_pattern_type::literal, anonymous,
                     acl_operation::write, acl_permission_type::allow));
  out.push_back(make(acl_resource_type::topic, kTopic, acl_pattern_type::literal, anonymous,
                     acl_operation::read, acl_permission_type::allow));
  out.push_back(make(acl_resource_type::group, "perf-consumer", acl_pattern_type::prefixed,
                     anonymous, acl_operation::read, acl_permission_type::allow));
  const acl_operation ops[] = {acl_operation::read, acl_operation::write, acl_operation::describe,
                               acl_operation::alter};
  const std::string topic = kTopic;
  for (int i = 0; static_cast<int>(out.size()) < n; ++i) {
    const std::string user = "User:user-" + std::to_string(i);
    const acl_operation op = ops[i % 4];
    const acl_permission_type permission =
        i % 10 == 9 ? acl_permission_type::deny : acl_permission_type::allow;
    switch (i % 4) {
      case 0:
        out.push_back(
            make(acl_resource_type::topic, topic, acl_pattern_type::literal, user, op, permission));
        break;
      case 1: {
        const std::string name = i % 8 == 1 ? topic.substr(0, 1 + (i / 4) % topic.size())
                                            : "team-" + std::to_string(i) + ".";
        out.push_back(
            make(acl_resource_type::topic, name, acl_pattern_type::prefixed, user, op, permission));
        break;
      }
      case 2:
        out.push_back(make(acl_resource_type::topic, "topic-" + std::to_string(i),
                           acl_pattern_type::literal, user, op, permission));
        break;
      default:
        out.push_back(make(acl_resource_type::group, "group-" + std::to_string(i),
                           acl_pattern_type::literal, user, acl_operation::read, permission));
        break;
    }
  }
  return out;
}

const acl_subject kClient{
    .principal_type = "User", .principal_name = "ANONYMOUS", .host = "127.0.0.1"};

// Taking a snapshot, as every request does when ACLs are on.
void snapshot(benchmark::State& state) {
  const authorizer a({}, bindings(static_cast<int>(state.range(0))));
  for (auto _ : state) {
    auto s = a.snapshot();
    benchmark::DoNotOptimize(s);
  }
}
BENCHMARK(snapshot)->Arg(1000);

// One check: WRITE on topic "perf" (allowed).
void authorize_write(benchmark::State& state) {
  const authorizer a({}, bindings(static_cast<int>(state.range(0))));
  const auto s = a.snapshot();
  for (auto _ : state) {
    benchmark::DoNotOptimize(
        s->authorize(kClient, acl_operation::write, acl_resource_type::topic, kTopic));
  }
  state.counters["acls"] = static_cast<double>(s->bindings().size());
}
BENCHMARK(authorize_write)->Arg(0)->Arg(1000)->Arg(10000);

// A Produce request's checks to one topic: the snapshot, then WRITE on the topic.
void produce_request_checks(benchmark::State& state) {
  const authorizer a({}, bindings(static_cast<int>(state.range(0))));
  for (auto _ : state) {
    const auto s = a.snapshot();
    benchmark::DoNotOptimize(
        s->authorize(kClient, acl_operation::write, acl_resource_type::topic, kTopic));
  }
}
BENCHMARK(produce_request_checks)->Arg(1000)->Arg(10000);

}  // namespace

BENCHMARK_MAIN();
