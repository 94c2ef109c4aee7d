#include "base/redact.h"

#include <algorithm>
#include <array>
#include <cstddef>
#include <iterator>
#include <optional>
#include <vector>

namespace silt::base {
namespace {

// [begin, end) of a secret inside the URI.
struct span {
  size_t begin = 0;
  size_t end = 0;
};

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// %XX escapes decoded; a malformed escape is kept as written.
std::string percent_decoded(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size()) {
      const int hi = hex_value(s[i + 1]);
      const int lo = hex_value(s[i + 2]);
      if (hi >= 0 && lo >= 0) {
        out += static_cast<char>(hi * 16 + lo);
        i += 2;
        continue;
      }
    }
    out += s[i];
  }
  return out;
}

// The password of "scheme://user:password@host" in `text`: from the first ':' after "://" to
// the last '@' before the first '/' or the first '?', whichever comes later (a password may
// hold an unescaped '/' or '?'; masking a little more of an odd URI beats showing a secret).
// Positions are relative to `text`.
std::optional<span> userinfo_password(std::string_view text) {
  const size_t scheme_end = text.find("://");
  if (scheme_end == std::string_view::npos) return std::nullopt;
  const size_t start = scheme_end + 3;
  const size_t slash = text.find('/', start);
  const size_t question = text.find('?', start);
  const size_t limit = std::max(slash == std::string_view::npos ? text.size() : slash,
                                question == std::string_view::npos ? text.size() : question);
  if (limit == start) return std::nullopt;
  const size_t at = text.substr(0, limit).rfind('@');
  if (at == std::string_view::npos || at < start) return std::nullopt;
  const size_t colon = text.substr(0, at).find(':', start);
  if (colon == std::string_view::npos) return std::nullopt;
  return span{colon + 1, at};
}

// Appends the secrets of the query of `uri` that begins after position `q` (a '?'), in order.
void add_query_spans(std::string_view uri, size_t q, std::vector<span>& spans) {
  if (q == std::string_view::npos) return;
  bool in_secret = false;  // the previous parameter's value was masked
  size_t i = q + 1;
  while (i <= uri.size()) {
    size_t amp = uri.find('&', i);
    if (amp == std::string_view::npos) amp = uri.size();
    const std::string_view part = uri.substr(i, amp - i);
    const size_t eq = part.find('=');
    if (eq == std::string_view::npos) {
      // A word without '=' right after a secret: the secret held an unescaped '&'.
      if (in_secret && !part.empty()) spans.back().end = amp;
    } else {
      in_secret = is_secret_name(part.substr(0, eq));
      if (in_secret) {
        spans.push_back({i + eq + 1, amp});
      } else if (const auto s = userinfo_password(part.substr(eq + 1))) {
        spans.push_back({i + eq + 1 + s->begin, i + eq + 1 + s->end});
      }
    }
    i = amp + 1;
  }
}

// Every secret of `uri` (see redact_uri), ordered by where it begins; they may overlap.
std::vector<span> secret_spans(std::string_view uri) {
  const size_t first_question = uri.find('?');
  const size_t scheme_end = uri.find("://");
  // The user information counts only where the scheme comes before any query.
  std::optional<span> user;
  if (scheme_end != std::string_view::npos && scheme_end < first_question) {
    user = userinfo_password(uri);
  }
  std::vector<span> spans;
  if (user) spans.push_back(*user);
  add_query_spans(uri, user ? uri.find('?', user->end) : first_question, spans);
  if (!user || first_question > user->end) return spans;
  // A '?' before the '@': either the password holds it (postgresql://u:pa?ss@h/db) or the
  // '@' is in a parameter (postgresql://h:5432?password=p@ss). Both readings are masked.
  std::vector<span> other;
  add_query_spans(uri, first_question, other);
  std::vector<span> all;
  all.reserve(spans.size() + other.size());
  std::merge(spans.begin(), spans.end(), other.begin(), other.end(), std::back_inserter(all),
             [](const span& a, const span& b) { return a.begin < b.begin; });
  return all;
}

bool is_alnum(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

// `text` with every occurrence of `what` (not empty) replaced by `with`, in one pass. With
// `whole_word`, only occurrences without a letter or digit right before or after them.
std::string replace_all(std::string_view text, std::string_view what, std::string_view with,
                        bool whole_word = false) {
  std::string out;
  out.reserve(text.size());
  size_t from = 0;  // copied up to here
  size_t search = 0;
  while (true) {
    const size_t hit = text.find(what, search);
    if (hit == std::string_view::npos) break;
    const size_t end = hit + what.size();
    if (whole_word &&
        ((hit > 0 && is_alnum(text[hit - 1])) || (end < text.size() && is_alnum(text[end])))) {
      search = hit + 1;
      continue;
    }
    out.append(text.substr(from, hit - from));
    out.append(with);
    from = search = end;
  }
  out.append(text.substr(from));
  return out;
}

bool ends_with_any(std::string_view s, std::initializer_list<std::string_view> suffixes) {
  return std::any_of(suffixes.begin(), suffixes.end(),
                     [s](std::string_view x) { return s.ends_with(x); });
}

}  // namespace

bool is_secret_name(std::string_view name) {
  std::string n = percent_decoded(name);
  for (auto& c : n) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    if (c == '.' || c == '-') c = '_';
  }
  static constexpr std::array<std::string_view, 10> kNames = {
      "key",          "sas",        "sig",
      "pass",         "pwd",        "auth",
      "apikey",       "accountkey", "sharedaccesssignature",
      "authorization"};
  if (std::find(kNames.begin(), kNames.end(), n) != kNames.end()) return true;
  if (ends_with_any(n, {"password", "passwd", "secret", "token", "signature", "jaas_config"})) {
    return true;
  }
  // "_key" names a key, except the two that name none: an access key id is not a secret (AWS
  // shows it in every signed request), a public key is public.
  return n.ends_with("_key") && !ends_with_any(n, {"access_key", "public_key"});
}

std::string redact_uri(std::string_view uri) {
  std::string out;
  out.reserve(uri.size());
  size_t from = 0;  // copied or masked up to here
  for (const auto& s : secret_spans(uri)) {
    if (s.begin >= from) {
      out.append(uri.substr(from, s.begin - from));
      out.append(redacted);
    }
    from = std::max(from, s.end);  // a span overlapping the previous one extends it
  }
  out.append(uri.substr(from));
  return out;
}

std::string redact_secrets(std::string_view text, std::string_view uri) {
  std::string out = uri.empty() ? std::string(text) : replace_all(text, uri, redact_uri(uri));
  // A short secret ("b", "pw") is masked only where it stands as a word of its own, so that it
  // does not eat into the words around it ("bucket"); a longer one wherever it is.
  constexpr size_t kShort = 8;
  const auto mask = [&out](std::string_view secret) {
    if (secret.empty()) return;
    out = replace_all(out, secret, redacted, secret.size() < kShort);
    const std::string decoded = percent_decoded(secret);
    if (!decoded.empty() && decoded != secret) {
      out = replace_all(out, decoded, redacted, decoded.size() < kShort);
    }
  };
  for (const auto& s : secret_spans(uri)) {
    const std::string_view secret = uri.substr(s.begin, s.end - s.begin);
    mask(secret);
    // A secret with an unescaped '&' in it, piece by piece too: a parser may quote a piece as
    // a parameter of its own.
    if (secret.find('&') == std::string_view::npos) continue;
    for (size_t from = 0; from <= secret.size();) {
      size_t amp = secret.find('&', from);
      if (amp == std::string_view::npos) amp = secret.size();
      mask(secret.substr(from, amp - from));
      from = amp + 1;
    }
  }
  return out;
}

}  // namespace silt::base
