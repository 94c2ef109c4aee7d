// The pieces the Kafka perf-test modes share (kafka_perf.h): Java's number and date formatting,
// the flag parser, Java properties and their librdkafka names, Kafka's throttler and producer
// stats, and the tools' lines. Nothing here talks to a broker.
#include "kafka_perf.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>
#include <system_error>

#include <nlohmann/json.hpp>

#include "base/java_properties.h"

namespace silt::perf {
namespace {

// The parts joined with one allocation.
template <class... Parts>
std::string concat(const Parts&... parts) {
  std::string out;
  out.reserve((std::string_view(parts).size() + ...));
  (out.append(std::string_view(parts)), ...);
  return out;
}

}  // namespace

// ================================================================ Java's formatting

std::string java_fixed(double v, int decimals) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "Infinity" : "-Infinity";
  // The shortest digits that read back as v, as Java's Formatter starts from them.
  std::array<char, 64> buf{};
  const auto res =
      std::to_chars(buf.data(), buf.data() + buf.size(), v, std::chars_format::scientific);
  std::string_view s(buf.data(), static_cast<size_t>(res.ptr - buf.data()));
  const bool negative = s.front() == '-';
  if (negative) s.remove_prefix(1);
  const size_t e = s.find('e');
  std::string digits(1, s.front());
  if (s.size() > 1 && s[1] == '.') digits.append(s.substr(2, e - 2));
  int exponent = 0;
  const std::string_view exp_text = s.substr(e + 1);
  std::from_chars(exp_text.data() + (exp_text.front() == '+' ? 1 : 0),
                  exp_text.data() + exp_text.size(), exponent);
  // digits is d0 d1 d2 ... with the decimal point after d(point - 1).
  int point = exponent + 1;
  if (point <= 0) {
    digits.insert(0, static_cast<size_t>(1 - point), '0');
    point = 1;
  }
  const size_t keep = static_cast<size_t>(point) + static_cast<size_t>(decimals);
  if (digits.size() <= keep) digits.append(keep + 1 - digits.size(), '0');
  const bool round_up = digits[keep] >= '5';  // HALF_UP on the decimal digits
  digits.resize(keep);
  if (round_up) {
    size_t i = keep;
    while (i > 0 && digits[i - 1] == '9') digits[--i] = '0';
    if (i == 0) {
      digits.insert(digits.begin(), '1');
      ++point;
    } else {
      ++digits[i - 1];
    }
  }
  std::string out = negative ? "-" : "";
  const size_t int_digits = static_cast<size_t>(point);
  size_t first = 0;  // no leading zeros in the integer part, but at least one digit
  while (first + 1 < int_digits && digits[first] == '0') ++first;
  out.append(digits, first, int_digits - first);
  if (decimals > 0) {
    out += '.';
    out.append(digits, int_digits, std::string::npos);
  }
  return out;
}

namespace {

constexpr std::string_view date_letters = "GyYMLwWDdFEuaHkKhmsSzZX";
constexpr std::array<std::string_view, 12> month_names = {
    "January", "February", "March",     "April",   "May",      "June",
    "July",    "August",   "September", "October", "November", "December"};
constexpr std::array<std::string_view, 7> day_names = {"Sunday",   "Monday", "Tuesday", "Wednesday",
                                                       "Thursday", "Friday", "Saturday"};

std::string zero_pad(int64_t v, int width) {
  std::string s = std::to_string(v < 0 ? -v : v);
  if (static_cast<int>(s.size()) < width) s.insert(0, static_cast<size_t>(width) - s.size(), '0');
  return v < 0 ? "-" + s : s;
}

bool is_leap(int year) {
  return (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
}

// "+hhmm", "+hh" or "+hh:mm" for an offset east of UTC in seconds.
std::string utc_offset(long offset_s, bool colon, bool minutes) {
  const char sign = offset_s < 0 ? '-' : '+';
  const long m = std::labs(offset_s) / 60;
  std::string out(1, sign);
  out += zero_pad(m / 60, 2);
  if (minutes) out += (colon ? ":" : "") + zero_pad(m % 60, 2);
  return out;
}

}  // namespace

tl::expected<java_date_format, std::string> java_date_format::compile(std::string_view pattern) {
  java_date_format f;
  auto add_text = [&f](std::string_view text) {
    if (f.fields_.empty() || f.fields_.back().letter != 0) f.fields_.push_back({});
    f.fields_.back().text.append(text);
  };
  for (size_t i = 0; i < pattern.size();) {
    const char c = pattern[i];
    if (c == '\'') {
      if (i + 1 < pattern.size() && pattern[i + 1] == '\'') {  // '' is a quote
        add_text("'");
        i += 2;
        continue;
      }
      std::string text;
      size_t j = i + 1;
      for (;; ++j) {
        if (j >= pattern.size()) return tl::unexpected(std::string("Unterminated quote"));
        if (pattern[j] != '\'') {
          text += pattern[j];
        } else if (j + 1 < pattern.size() && pattern[j + 1] == '\'') {
          text += '\'';
          ++j;
        } else {
          break;
        }
      }
      add_text(text);
      i = j + 1;
      continue;
    }
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
      if (date_letters.find(c) == std::string_view::npos) {
        return tl::unexpected("Illegal pattern character '" + std::string(1, c) + "'");
      }
      size_t j = i;
      while (j < pattern.size() && pattern[j] == c) ++j;
      const int count = static_cast<int>(j - i);
      if (c == 'X' && count > 3) {
        return tl::unexpected("invalid ISO 8601 format: length=" + std::to_string(count));
      }
      f.fields_.push_back({c, count, {}});
      i = j;
      continue;
    }
    add_text(std::string_view(&pattern[i], 1));
    ++i;
  }
  return f;
}

std::string java_date_format::format(int64_t epoch_ms) const {
  const int64_t secs = epoch_ms >= 0 ? epoch_ms / 1000 : -((-epoch_ms + 999) / 1000);
  const auto millis = static_cast<int>(epoch_ms - secs * 1000);
  const auto t = static_cast<time_t>(secs);
  struct tm tm {};
  localtime_r(&t, &tm);
  const int year = tm.tm_year + 1900;
  // Weeks as Locale.US counts them: from Sunday, week 1 holds January 1st.
  const int jan1_wday = ((tm.tm_wday - tm.tm_yday % 7) % 7 + 7) % 7;
  int week_of_year = (tm.tm_yday + jan1_wday) / 7 + 1;
  int week_year = year;
  if (tm.tm_yday + (6 - tm.tm_wday) >= (is_leap(year) ? 366 : 365)) {
    week_of_year = 1;  // this week holds next January 1st
    week_year = year + 1;
  }
  const int first_wday = ((tm.tm_wday - (tm.tm_mday - 1) % 7) % 7 + 7) % 7;
  const int week_of_month = (tm.tm_mday - 1 + first_wday) / 7 + 1;
  const int hour12 = tm.tm_hour % 12;

  std::string out;
  for (const field& f : fields_) {
    const int n = f.count;
    switch (f.letter) {
      case 0:
        out += f.text;
        break;
      case 'G':
        out += year > 0 ? "AD" : "BC";
        break;
      case 'y':
      case 'Y': {
        const int y = f.letter == 'y' ? year : week_year;
        out += n == 2 ? zero_pad(y % 100, 2) : zero_pad(y, n);
        break;
      }
      case 'M':
      case 'L':
        if (n >= 4) {
          out += month_names[static_cast<size_t>(tm.tm_mon)];
        } else if (n == 3) {
          out += month_names[static_cast<size_t>(tm.tm_mon)].substr(0, 3);
        } else {
          out += zero_pad(tm.tm_mon + 1, n);
        }
        break;
      case 'w':
        out += zero_pad(week_of_year, n);
        break;
      case 'W':
        out += zero_pad(week_of_month, n);
        break;
      case 'D':
        out += zero_pad(tm.tm_yday + 1, n);
        break;
      case 'd':
        out += zero_pad(tm.tm_mday, n);
        break;
      case 'F':
        out += zero_pad((tm.tm_mday - 1) / 7 + 1, n);
        break;
      case 'E': {
        const std::string_view name = day_names[static_cast<size_t>(tm.tm_wday)];
        out += n >= 4 ? name : name.substr(0, 3);
        break;
      }
      case 'u':
        out += zero_pad(tm.tm_wday == 0 ? 7 : tm.tm_wday, n);
        break;
      case 'a':
        out += tm.tm_hour < 12 ? "AM" : "PM";
        break;
      case 'H':
        out += zero_pad(tm.tm_hour, n);
        break;
      case 'k':
        out += zero_pad(tm.tm_hour == 0 ? 24 : tm.tm_hour, n);
        break;
      case 'K':
        out += zero_pad(hour12, n);
        break;
      case 'h':
        out += zero_pad(hour12 == 0 ? 12 : hour12, n);
        break;
      case 'm':
        out += zero_pad(tm.tm_min, n);
        break;
      case 's':
        out += zero_pad(tm.tm_sec, n);
        break;
      case 'S':
        out += zero_pad(millis, n);
        break;
      case 'z':
        out += tm.tm_zone != nullptr ? tm.tm_zone : "";
        break;
      case 'Z':
        out += utc_offset(tm.tm_gmtoff, false, true);
        break;
      case 'X':
        out += tm.tm_gmtoff == 0 ? std::string("Z") : utc_offset(tm.tm_gmtoff, n == 3, n >= 2);
        break;
      default:
        break;
    }
  }
  return out;
}

int32_t java_splittable_random::next_int(int32_t bound) {
  constexpr uint64_t golden_gamma = 0x9e3779b97f4a7c15ULL;
  auto next = [this] {
    seed_ += golden_gamma;
    uint64_t z = seed_;
    z = (z ^ (z >> 33)) * 0x62a9d9ed799705f5ULL;
    return static_cast<int32_t>(
        static_cast<uint32_t>(((z ^ (z >> 28)) * 0xcb24d0a5c88c35b3ULL) >> 32));
  };
  int32_t r = next();
  const int32_t m = bound - 1;
  if ((bound & m) == 0) return r & m;
  // Java's rejection loop; `u + m - r < 0` is an int overflow test there.
  for (auto u = static_cast<int32_t>(static_cast<uint32_t>(r) >> 1);;
       u = static_cast<int32_t>(static_cast<uint32_t>(next()) >> 1)) {
    r = u % bound;
    if (static_cast<int32_t>(static_cast<uint32_t>(u) + static_cast<uint32_t>(m) -
                             static_cast<uint32_t>(r)) >= 0) {
      return r;
    }
  }
}

// ================================================================ command lines

std::optional<std::string> parsed_flags::value(std::string_view name) const {
  auto it = values.find(name);
  if (it == values.end() || it->second.empty()) return std::nullopt;
  return it->second.back();
}

namespace {

bool is_negative_number(std::string_view s) {
  if (s.size() < 2 || s[0] != '-') return false;
  double d = 0;
  const auto res = std::from_chars(s.data(), s.data() + s.size(), d);
  return res.ec == std::errc() && res.ptr == s.data() + s.size();
}

// An argument that names a flag rather than being a value: "-x", "--xy", but not "-1" or "-".
bool looks_like_flag(std::string_view s) {
  return s.size() > 1 && s[0] == '-' && !is_negative_number(s);
}

std::string bare(std::string_view flag) {
  while (!flag.empty() && flag.front() == '-') flag.remove_prefix(1);
  return std::string(flag);
}

}  // namespace

tl::expected<parsed_flags, std::string> parse_flags(const std::vector<std::string>& args,
                                                    const std::vector<flag_spec>& specs,
                                                    flag_dialect dialect) {
  const bool jopt = dialect == flag_dialect::jopt;
  parsed_flags out;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (!looks_like_flag(arg)) {
      return tl::unexpected(jopt ? "unexpected argument '" + arg + "'"
                                 : "unrecognized arguments: '" + arg + "'");
    }
    const size_t eq = arg.find('=');
    const std::string name = arg.substr(0, eq);
    std::optional<std::string> inline_value;
    if (eq != std::string::npos) inline_value = arg.substr(eq + 1);

    // The flag itself, or the one flag it is a prefix of.
    const flag_spec* spec = nullptr;
    std::vector<const flag_spec*> candidates;
    for (const flag_spec& s : specs) {
      if (s.name == name) {
        spec = &s;
        break;
      }
      if (name.size() > 2 && name.starts_with("--") && s.name.starts_with(name)) {
        candidates.push_back(&s);
      }
    }
    if (spec == nullptr && candidates.size() == 1) spec = candidates.front();
    if (spec == nullptr && candidates.size() > 1) {
      std::string msg = "ambiguous option: " + name + " could match";
      for (size_t c = 0; c < candidates.size(); ++c) {
        msg += (c == 0 ? " " : ", ") + std::string(candidates[c]->name);
      }
      return tl::unexpected(msg);
    }
    if (spec == nullptr) {
      return tl::unexpected(jopt ? bare(name) + " is not a recognized option"
                                 : "unrecognized arguments: '" + arg + "'");
    }
    const std::string flag(spec->name);
    std::vector<std::string> values;
    switch (spec->arity) {
      case flag_arity::none:
        if (inline_value) {
          return tl::unexpected(jopt ? "Option " + bare(flag) + " does not take an argument"
                                     : "argument " + flag + ": ignored explicit argument '" +
                                           *inline_value + "'");
        }
        break;
      case flag_arity::one:
        if (inline_value) {
          values.push_back(*inline_value);
        } else if (i + 1 < args.size() && (jopt || !looks_like_flag(args[i + 1]))) {
          // jopt-simple takes the next argument whatever it looks like; argparse4j not.
          values.push_back(args[++i]);
        } else {
          return tl::unexpected(jopt ? "Option " + bare(flag) + " requires an argument"
                                     : "argument " + flag + ": expected one argument");
        }
        break;
      case flag_arity::optional:
        if (inline_value) {
          values.push_back(*inline_value);
        } else if (i + 1 < args.size() && !looks_like_flag(args[i + 1])) {
          values.push_back(args[++i]);
        }
        break;
      case flag_arity::one_or_more:
        if (inline_value) values.push_back(*inline_value);
        while (i + 1 < args.size() && !looks_like_flag(args[i + 1])) values.push_back(args[++i]);
        if (values.empty()) {
          return tl::unexpected(jopt ? "Option " + bare(flag) + " requires an argument"
                                     : "argument " + flag + ": expected at least one argument");
        }
        break;
    }
    out.values[flag] = std::move(values);
  }
  return out;
}

// ================================================================ client properties

properties parse_java_properties(std::string_view text) {
  properties out;
  for (auto& p : base::parse_java_properties(text)) {
    out.emplace_back(std::move(p.key), std::move(p.value));
  }
  return out;
}

tl::expected<properties, std::string> load_java_properties(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return tl::unexpected(path + ": " + std::generic_category().message(errno));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return tl::unexpected(path + ": read error");
  return parse_java_properties(text.str());
}

namespace {

std::optional<int64_t> to_int64(std::string_view s) {
  if (!s.empty() && s.front() == '+') s.remove_prefix(1);
  int64_t v = 0;
  const auto res = std::from_chars(s.data(), s.data() + s.size(), v);
  if (res.ec != std::errc() || res.ptr != s.data() + s.size() || s.empty()) return std::nullopt;
  return v;
}

// The librdkafka assignor for a Java assignor class (or a librdkafka name), and whether it
// rebalances cooperatively.
std::optional<std::pair<std::string, bool>> librdkafka_assignor(std::string_view java) {
  const size_t dot = java.rfind('.');
  const std::string_view cls = dot == std::string_view::npos ? java : java.substr(dot + 1);
  if (cls == "RangeAssignor" || cls == "range") return std::pair<std::string, bool>{"range", false};
  if (cls == "RoundRobinAssignor" || cls == "roundrobin") {
    return std::pair<std::string, bool>{"roundrobin", false};
  }
  if (cls == "CooperativeStickyAssignor" || cls == "cooperative-sticky") {
    return std::pair<std::string, bool>{"cooperative-sticky", true};
  }
  return std::nullopt;
}

std::string trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return std::string(s);
}

// Properties of the Java client that librdkafka has no use for: said, then left out.
const std::map<std::string_view, std::string_view>& java_only_properties() {
  static const std::map<std::string_view, std::string_view> m = {
      {"sasl.jaas.config", "librdkafka takes sasl.username and sasl.password instead"},
      {"sasl.login.callback.handler.class", "a Java class"},
      {"sasl.client.callback.handler.class", "a Java class"},
      {"ssl.truststore.location", "librdkafka reads PEM CA certificates from ssl.ca.location"},
      {"ssl.truststore.password", "librdkafka reads PEM CA certificates from ssl.ca.location"},
      {"ssl.truststore.type", "librdkafka reads PEM CA certificates from ssl.ca.location"},
      {"ssl.keystore.type", "librdkafka's ssl.keystore.location is a PKCS#12 file"},
      {"client.dns.lookup", "librdkafka tries every address a name resolves to"},
      {"interceptor.classes", "Java classes"},
      {"metric.reporters", "Java classes"},
      {"metrics.num.samples", "Java client metrics"},
      {"metrics.sample.window.ms", "Java client metrics"},
      {"metrics.recording.level", "Java client metrics"},
      {"auto.include.jmx.reporter", "Java client metrics"},
      {"enable.metrics.push", "Java client metrics"},
      {"partitioner.class", "librdkafka's partitioner is used (see its `partitioner` property)"},
      {"partitioner.ignore.keys", "the records have no key"},
      {"partitioner.adaptive.partitioning.enable", "librdkafka's partitioner is used"},
      {"partitioner.availability.timeout.ms", "librdkafka's partitioner is used"},
      {"max.poll.records", "silt-perf reads records one by one from librdkafka's queue"},
      {"group.remote.assignor", "librdkafka 2.0 speaks only the classic group protocol"},
      {"default.api.timeout.ms", "silt-perf's own waits apply"},
  };
  return m;
}

}  // namespace

librdkafka_settings map_java_properties(const properties& java, client_kind kind) {
  librdkafka_settings out;
  // Properties keep the last setting of a name.
  std::map<std::string, std::string> user;
  for (const auto& [k, v] : java) user[k] = v;
  auto user_value = [&user](std::initializer_list<std::string_view> names) {
    std::optional<std::string> v;
    for (std::string_view n : names) {
      if (auto it = user.find(std::string(n)); it != user.end()) v = trim(it->second);
    }
    return v;
  };
  auto set = [&out](std::string name, std::string value, std::string from = {}) {
    out.settings.push_back({std::move(name), std::move(value), std::move(from)});
  };

  // The Java client's defaults where librdkafka's differ, so that a run compares with one of
  // Kafka's tool. The user's properties come after them and win.
  if (kind == client_kind::producer) {
    set("acks", "all");
    set("batch.size", "16384");
    set("linger.ms", "5");
    set("queue.buffering.max.kbytes", "32768");  // buffer.memory=33554432
    // The Java producer bounds its buffer by bytes only.
    set("queue.buffering.max.messages", "2147483647");
    set("max.in.flight.requests.per.connection", "5");
    // librdkafka wants a transactional producer's delivery timeout within its transaction
    // timeout (60 s by default); the Java client does not.
    set("delivery.timeout.ms", user.contains("transactional.id")
                                   ? user_value({"transaction.timeout.ms"}).value_or("60000")
                                   : "120000");
    set("message.max.bytes", "1048576");  // max.request.size
    // Since Kafka 3.0 the producer is idempotent unless a setting conflicts with it; then it
    // quietly is not.
    if (!user.contains("enable.idempotence")) {
      const auto acks = user_value({"acks", "request.required.acks"});
      const auto retries = user_value({"retries", "message.send.max.retries"});
      const auto in_flight = user_value({"max.in.flight.requests.per.connection", "max.in.flight"});
      const bool acks_all = !acks || *acks == "all" || *acks == "-1";
      const bool retries_ok = !retries || to_int64(*retries).value_or(1) > 0;
      const bool in_flight_ok = !in_flight || to_int64(*in_flight).value_or(5) <= 5;
      set("enable.idempotence", acks_all && retries_ok && in_flight_ok ? "true" : "false");
    }
  } else {
    // The Java consumer lets the broker create a subscribed topic; librdkafka does not.
    set("allow.auto.create.topics", "true");
  }

  const std::string compression =
      user_value({"compression.type", "compression.codec"}).value_or("none");
  for (const auto& [name, raw] : user) {
    const std::string value = trim(raw);
    if (name == "key.serializer" || name == "value.serializer" || name == "key.deserializer" ||
        name == "value.deserializer") {
      continue;  // Kafka's tools send and read bytes whatever these say
    }
    if (auto it = java_only_properties().find(name); it != java_only_properties().end()) {
      out.notes.push_back("property '" + name + "' has no librdkafka equivalent and is ignored (" +
                          std::string(it->second) + ")");
      continue;
    }
    if (name == "send.buffer.bytes" || name == "receive.buffer.bytes") {
      // -1 is the OS default in Java, 0 in librdkafka.
      set("socket." + name, value == "-1" ? "0" : value, name);
    } else if (name == "group.protocol") {
      if (value != "classic" && value != "CLASSIC") {
        out.notes.push_back("group.protocol=" + value +
                            " is ignored: librdkafka 2.0 speaks only the classic group protocol");
      }
    } else if (kind == client_kind::producer && name == "buffer.memory") {
      const auto bytes = to_int64(value);
      set("queue.buffering.max.kbytes",
          bytes ? std::to_string(std::max<int64_t>(1, (*bytes + 1023) / 1024)) : value, name);
    } else if (kind == client_kind::producer && name == "batch.size") {
      if (value == "0") {
        // librdkafka's batches hold at least one record: one record per batch is the closest.
        set("batch.num.messages", "1", name);
        out.notes.push_back(
            "batch.size=0 (no batching) is sent as librdkafka's batch.num.messages=1");
      } else {
        set("batch.size", value, name);
      }
    } else if (kind == client_kind::producer && name == "max.request.size") {
      set("message.max.bytes", value, name);
    } else if (kind == client_kind::producer && name == "max.block.ms") {
      if (const auto ms = to_int64(value)) {
        out.max_block_ms = *ms;
      } else {
        set(name, value, name);  // librdkafka then names the bad value
      }
    } else if (kind == client_kind::producer && name.starts_with("compression.") &&
               name.ends_with(".level")) {
      // compression.gzip.level, compression.lz4.level, compression.zstd.level: librdkafka has
      // one compression.level, for the codec in use.
      const std::string codec = name.substr(12, name.size() - 12 - 6);
      if (codec == compression) {
        set("compression.level", value, name);
      } else {
        out.notes.push_back(
            concat("property '", name, "' is ignored: compression.type is ", compression));
      }
    } else if (kind == client_kind::consumer && name == "fetch.max.wait.ms") {
      set("fetch.wait.max.ms", value, name);
    } else if (kind == client_kind::consumer && name == "auto.offset.reset" && value == "none") {
      set(name, "error", name);
    } else if (kind == client_kind::consumer && name == "partition.assignment.strategy") {
      // A list of Java classes; librdkafka cannot mix eager and cooperative assignors, and a
      // Java group settles on the first one its members share: keep those of the first kind.
      std::string list;
      std::optional<bool> cooperative;
      std::stringstream items(value);
      for (std::string item; std::getline(items, item, ',');) {
        item = trim(item);
        if (item.empty()) continue;
        const auto assignor = librdkafka_assignor(item);
        if (!assignor) {
          out.notes.push_back("assignor '" + item + "' has no librdkafka equivalent; left out");
          continue;
        }
        if (cooperative && *cooperative != assignor->second) {
          out.notes.push_back("assignor '" + item +
                              "' left out: librdkafka cannot mix eager and cooperative ones");
          continue;
        }
        cooperative = assignor->second;
        list += (list.empty() ? "" : ",") + assignor->first;
      }
      if (!list.empty()) set(name, list, name);
    } else {
      set(name, value, name);
    }
  }
  return out;
}

tl::expected<librdkafka_conf, std::string> make_librdkafka_conf(
    const std::vector<librdkafka_setting>& settings) {
  librdkafka_conf out;
  out.conf.reset(RdKafka::Conf::create(RdKafka::Conf::CONF_GLOBAL));
  std::string err;
  for (const librdkafka_setting& s : settings) {
    const std::string named = s.from.empty() ? s.name : s.from;
    const std::string renamed =
        !s.from.empty() && s.from != s.name ? concat(" (librdkafka's ", s.name, ")") : "";
    switch (out.conf->set(s.name, s.value, err)) {
      case RdKafka::Conf::CONF_OK:
        break;
      case RdKafka::Conf::CONF_UNKNOWN:
        out.warnings.push_back(concat("property '", named, "'", renamed,
                                      " is not known to librdkafka and is ignored"));
        break;
      case RdKafka::Conf::CONF_INVALID:
        return tl::unexpected(
            concat("invalid value '", s.value, "' for property '", named, "'", renamed, ": ", err));
    }
  }
  return out;
}

void client_events::event_cb(RdKafka::Event& event) {
  switch (event.type()) {
    case RdKafka::Event::EVENT_STATS: {
      base::lock_guard lock(mu_);
      stats_ = event.str();
      ++stats_count_;
      break;
    }
    case RdKafka::Event::EVENT_ERROR: {
      if (event.fatal()) fatal_.store(true, std::memory_order_relaxed);
      std::string text = (event.fatal() ? "silt-perf: librdkafka fatal error: "
                                        : "silt-perf: librdkafka error: ") +
                         RdKafka::err2str(event.err());
      if (!event.str().empty()) text += ": " + event.str();
      base::lock_guard lock(mu_);
      if (text == last_error_) break;
      last_error_ = text;
      std::fprintf(stderr, "%s\n", text.c_str());
      break;
    }
    case RdKafka::Event::EVENT_LOG:
      std::fprintf(stderr, "%%%d|%s| %s\n", static_cast<int>(event.severity()), event.fac().c_str(),
                   event.str().c_str());
      break;
    default:
      break;
  }
}

std::pair<std::string, uint64_t> client_events::latest_stats() {
  base::lock_guard lock(mu_);
  return {stats_, stats_count_};
}

// ================================================================ throttler and stats

throughput_throttler::throughput_throttler(double target_per_s, int64_t start_ms, sleeper sleep)
    : start_ms_(start_ms),
      target_(target_per_s),
      sleep_time_ns_(target_per_s > 0 ? static_cast<int64_t>(1e9 / target_per_s)
                                      : std::numeric_limits<int64_t>::max()),
      sleep_(std::move(sleep)) {}

bool throughput_throttler::should_throttle(int64_t amount_so_far, int64_t send_start_ms) const {
  if (target_ < 0) return false;
  // Kafka computes the elapsed seconds as a float.
  const float elapsed_s = static_cast<float>(send_start_ms - start_ms_) / 1000.F;
  return elapsed_s > 0 && static_cast<double>(amount_so_far) / elapsed_s > target_;
}

void throughput_throttler::throttle() {
  if (target_ == 0) {
    sleep_(std::chrono::nanoseconds::max());  // Kafka's throttler waits for a wake-up never sent
    return;
  }
  constexpr int64_t min_sleep_ns = 2'000'000;
  sleep_deficit_ns_ += sleep_time_ns_;
  if (sleep_deficit_ns_ >= min_sleep_ns) {
    sleep_(std::chrono::nanoseconds(sleep_deficit_ns_));
    sleep_deficit_ns_ = 0;  // an oversleep is not credited, as in Kafka's
  }
}

producer_stats::producer_stats(int64_t num_records, int64_t start_ms, int64_t reporting_interval_ms)
    : start_ms_(start_ms),
      reporting_interval_ms_(reporting_interval_ms),
      sampling_(std::max<int64_t>(1, num_records / std::clamp<int64_t>(num_records, 1, 500'000))),
      latencies_(static_cast<size_t>(std::max<int64_t>(num_records, 0) / sampling_ + 1)),
      window_start_ms_(start_ms) {}

std::optional<std::string> producer_stats::record(int32_t latency_ms, int32_t bytes,
                                                  int64_t now_ms) {
  ++count_;
  bytes_ += bytes;
  total_latency_ += latency_ms;
  max_latency_ = std::max(max_latency_, latency_ms);
  ++window_count_;
  window_bytes_ += bytes;
  window_total_latency_ += latency_ms;
  window_max_latency_ = std::max(window_max_latency_, latency_ms);
  if (iteration_ % sampling_ == 0) {
    if (index_ < latencies_.size()) latencies_[index_] = latency_ms;
    ++index_;
  }
  ++iteration_;
  if (now_ms - window_start_ms_ < reporting_interval_ms_) return std::nullopt;
  std::string line = producer_window_line(window_count_, window_bytes_, now_ms - window_start_ms_,
                                          window_total_latency_, window_max_latency_);
  window_start_ms_ = now_ms;
  window_count_ = 0;
  window_max_latency_ = 0;
  window_total_latency_ = 0;
  window_bytes_ = 0;
  return line;
}

std::string producer_stats::total_line(int64_t now_ms) {
  const std::vector<int32_t> percentiles =
      kafka_percentiles(latencies_, index_, {0.5, 0.95, 0.99, 0.999});
  return producer_total_line(count_, bytes_, now_ms - start_ms_, total_latency_, max_latency_,
                             percentiles);
}

std::vector<int32_t> kafka_percentiles(std::vector<int32_t>& samples, size_t n,
                                       const std::vector<double>& ps) {
  const size_t size = std::min(n, samples.size());
  std::sort(samples.begin(), samples.begin() + static_cast<std::ptrdiff_t>(size));
  std::vector<int32_t> out;
  out.reserve(ps.size());
  for (double p : ps) {
    const auto i = static_cast<size_t>(p * static_cast<double>(size));
    out.push_back(i < samples.size() ? samples[i] : 0);
  }
  return out;
}

// ================================================================ the tools' lines

namespace {

constexpr double mib = 1024.0 * 1024.0;

// Kafka's producer rates, computed as its Stats computes them.
struct producer_rates {
  double records_per_s;
  double mb_per_s;
  double avg_latency_ms;
};
producer_rates rates(int64_t count, int64_t bytes, int64_t elapsed_ms, int64_t total_latency) {
  const auto elapsed = static_cast<double>(elapsed_ms);
  return {1000.0 * static_cast<double>(count) / elapsed,
          1000.0 * static_cast<double>(bytes) / elapsed / mib,
          static_cast<double>(total_latency) / static_cast<double>(count)};
}

}  // namespace

std::string producer_window_line(int64_t count, int64_t bytes, int64_t elapsed_ms,
                                 int64_t total_latency_ms, int32_t max_latency_ms) {
  const producer_rates r = rates(count, bytes, elapsed_ms, total_latency_ms);
  return std::to_string(count) + " records sent, " + java_fixed(r.records_per_s, 1) +
         " records/sec (" + java_fixed(r.mb_per_s, 2) + " MB/sec), " +
         java_fixed(r.avg_latency_ms, 1) + " ms avg latency, " +
         java_fixed(static_cast<double>(max_latency_ms), 1) + " ms max latency.";
}

std::string producer_total_line(int64_t count, int64_t bytes, int64_t elapsed_ms,
                                int64_t total_latency_ms, int32_t max_latency_ms,
                                const std::vector<int32_t>& percentiles) {
  const producer_rates r = rates(count, bytes, elapsed_ms, total_latency_ms);
  auto p = [&percentiles](size_t i) {
    return std::to_string(i < percentiles.size() ? percentiles[i] : 0);
  };
  return std::to_string(count) + " records sent, " + java_fixed(r.records_per_s, 1) +
         " records/sec (" + java_fixed(r.mb_per_s, 2) + " MB/sec), " +
         java_fixed(r.avg_latency_ms, 2) + " ms avg latency, " +
         java_fixed(static_cast<double>(max_latency_ms), 2) + " ms max latency, " + p(0) +
         " ms 50th, " + p(1) + " ms 95th, " + p(2) + " ms 99th, " + p(3) + " ms 99.9th.";
}

std::string consumer_header(bool detailed) {
  return std::string(detailed ? "time, threadId" : "start.time, end.time") +
         ", data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, rebalance.time.ms, "
         "fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec";
}

std::string consumer_summary_line(int64_t start_ms, int64_t end_ms, int64_t bytes, int64_t messages,
                                  int64_t join_ms, const java_date_format& date_format) {
  const double elapsed_s = static_cast<double>(end_ms - start_ms) / 1000.0;
  const int64_t fetch_ms = (end_ms - start_ms) - join_ms;
  const double mb = static_cast<double>(bytes) / mib;
  const auto n = static_cast<double>(messages);
  const double fetch_s = static_cast<double>(fetch_ms) / 1000.0;
  return date_format.format(start_ms) + ", " + date_format.format(end_ms) + ", " +
         java_fixed(mb, 4) + ", " + java_fixed(mb / elapsed_s, 4) + ", " +
         std::to_string(messages) + ", " + java_fixed(n / elapsed_s, 4) + ", " +
         std::to_string(join_ms) + ", " + std::to_string(fetch_ms) + ", " +
         java_fixed(mb / fetch_s, 4) + ", " + java_fixed(n / fetch_s, 4);
}

std::string consumer_progress_line(const consumer_interval& in,
                                   const java_date_format& date_format) {
  const auto elapsed_ms = static_cast<double>(in.end_ms - in.start_ms);
  const double total_mb = static_cast<double>(in.bytes) / mib;
  const double interval_mb = static_cast<double>(in.bytes - in.last_bytes) / mib;
  const double mb_per_s = 1000.0 * interval_mb / elapsed_ms;
  const double msgs_per_s =
      (static_cast<double>(in.messages - in.last_messages) / elapsed_ms) * 1000.0;
  const int64_t fetch_ms = in.end_ms - in.start_ms - in.join_ms;
  const double fetch_mb_per_s =
      fetch_ms <= 0 ? 0.0 : 1000.0 * interval_mb / static_cast<double>(fetch_ms);
  const double fetch_msgs_per_s =
      fetch_ms <= 0 ? 0.0
                    : 1000.0 * static_cast<double>(in.messages - in.last_messages) /
                          static_cast<double>(fetch_ms);
  return date_format.format(in.end_ms) + ", 0, " + java_fixed(total_mb, 4) + ", " +
         java_fixed(mb_per_s, 4) + ", " + std::to_string(in.messages) + ", " +
         java_fixed(msgs_per_s, 4) + ", " + std::to_string(in.join_ms) + ", " +
         std::to_string(fetch_ms) + ", " + java_fixed(fetch_mb_per_s, 4) + ", " +
         java_fixed(fetch_msgs_per_s, 4);
}

std::string consumer_timeout_warning(int64_t timeout_ms) {
  return "WARNING: Exiting before consuming the expected number of messages: timeout (" +
         std::to_string(timeout_ms) +
         " ms) exceeded. You can use the --timeout option to increase the timeout.";
}

std::string librdkafka_metrics_table(const std::string& stats_json) {
  const nlohmann::json stats = nlohmann::json::parse(stats_json, nullptr, false);
  if (!stats.is_object()) return {};
  const std::string client = stats.value("client_id", std::string());
  std::map<std::string, std::string> metrics;  // sorted, as Kafka's TreeMap
  auto value_text = [](const nlohmann::json& v) -> std::optional<std::string> {
    if (v.is_number_integer()) return std::to_string(v.get<int64_t>());
    if (v.is_number_float()) return java_fixed(v.get<double>(), 3);
    if (v.is_string()) return v.get<std::string>();
    if (v.is_boolean()) return v.get<bool>() ? "true" : "false";
    return std::nullopt;
  };
  auto add_scalars = [&](const nlohmann::json& obj, const std::string& group,
                         const std::string& tags) {
    for (const auto& [k, v] : obj.items()) {
      if (auto text = value_text(v)) metrics[concat(group, ":", k, ":{", tags, "}")] = *text;
    }
  };
  // librdkafka's rolling windows: their averages and percentiles.
  auto add_windows = [&](const nlohmann::json& obj, const std::string& group,
                         const std::string& tags, std::initializer_list<const char*> windows) {
    for (const char* w : windows) {
      if (!obj.contains(w) || !obj[w].is_object()) continue;
      for (const char* s : {"min", "max", "avg", "p50", "p99", "cnt"}) {
        if (const auto it = obj[w].find(s); it != obj[w].end()) {
          if (auto text = value_text(*it)) {
            metrics[concat(group, ":", w, "-", s, ":{", tags, "}")] = *text;
          }
        }
      }
    }
  };
  const std::string client_tag = "client-id=" + client;
  add_scalars(stats, "librdkafka", client_tag);
  if (stats.contains("brokers") && stats["brokers"].is_object()) {
    for (const auto& [name, b] : stats["brokers"].items()) {
      const std::string tags = concat(client_tag, ", broker=", name);
      add_scalars(b, "librdkafka-broker", tags);
      add_windows(b, "librdkafka-broker", tags,
                  {"int_latency", "outbuf_latency", "rtt", "throttle"});
    }
  }
  if (stats.contains("topics") && stats["topics"].is_object()) {
    for (const auto& [name, t] : stats["topics"].items()) {
      const std::string tags = concat(client_tag, ", topic=", name);
      add_scalars(t, "librdkafka-topic", tags);
      add_windows(t, "librdkafka-topic", tags, {"batchsize", "batchcnt"});
    }
  }
  if (stats.contains("cgrp") && stats["cgrp"].is_object()) {
    add_scalars(stats["cgrp"], "librdkafka-cgrp", client_tag);
  }
  if (metrics.empty()) return {};
  size_t width = std::string_view("Metric Name").size();
  for (const auto& [name, value] : metrics) width = std::max(width, name.size());
  auto pad = [width](const std::string& s) { return s + std::string(width - s.size(), ' '); };
  std::string out = "\n" + pad("Metric Name") + "   Value\n";
  for (const auto& [name, value] : metrics) out += pad(name) + " : " + value + "\n";
  return out;
}

void print_line(const std::string& line) {
  std::fputs(line.c_str(), stdout);
  std::fputc('\n', stdout);
  std::fflush(stdout);
}

void print_error(const std::string& text) {
  std::fprintf(stderr, "silt-perf: %s\n", text.c_str());
}

}  // namespace silt::perf
