#include "coordinator/topic_regex.h"

#include <re2/re2.h>
#include <time.h>

#include "coordinator/consumer_group.h"

namespace silt::coordinator {

namespace {

// The CPU time the calling thread has taken.
std::chrono::nanoseconds thread_cpu_time() {
  timespec ts{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec);
}

// How many names are matched between two looks at the clock.
constexpr size_t names_per_clock_check = 8;

}  // namespace

std::unique_ptr<re2::RE2> compile_topic_regex(const std::string& pattern) {
  re2::RE2::Options o;
  o.set_log_errors(false);
  o.set_max_mem(int64_t{2} << 20);
  return std::make_unique<re2::RE2>(pattern, o);
}

bool matchable_topic_regex(const std::optional<std::string>& pattern) {
  return pattern && !pattern->empty() && pattern->size() <= max_topic_regex_bytes;
}

regex_match_map match_topic_regexes(const std::vector<std::string>& patterns,
                                    const topic_lookup& topics, std::chrono::nanoseconds budget) {
  regex_match_map out;
  if (patterns.empty()) return out;
  const auto deadline = thread_cpu_time() + budget;
  // The version first: topics changing meanwhile make the matches look older than they are,
  // never newer, so they are matched again.
  const uint64_t version = topics.version();
  const std::vector<topic_meta> all = topics.all();
  bool out_of_time = false;
  for (const auto& pattern : patterns) {
    auto [it, fresh] = out.try_emplace(pattern);
    if (!fresh) continue;
    regex_matches& m = it->second;
    m.version = version;
    if (out_of_time) continue;
    const auto re = compile_topic_regex(pattern);
    if (!re->ok()) {
      m.error = re->error();
      continue;
    }
    std::set<topic_uuid> ids;
    for (size_t i = 0; i < all.size(); ++i) {
      if (i % names_per_clock_check == 0 && thread_cpu_time() > deadline) {
        out_of_time = true;
        break;
      }
      // Whole names, as Kafka matches (RE2/J's matches()).
      if (re2::RE2::FullMatch(all[i].name, *re)) ids.insert(all[i].id);
    }
    if (!out_of_time) m.ids = std::move(ids);
  }
  return out;
}

}  // namespace silt::coordinator
