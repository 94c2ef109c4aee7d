#include "security/json_reader.h"

#include <new>
#include <vector>

namespace silt::security {
namespace {

using nlohmann::json;

// nlohmann's SAX interface, building the document as its own DOM parser does, plus the depth
// and duplicate-name checks. Returning false stops the parse at once.
class bounded_builder {
 public:
  bounded_builder(json& root, size_t max_depth) : root_(root), max_depth_(max_depth) {}

  bool null() { return add(json(nullptr)) != nullptr; }
  bool boolean(bool v) { return add(json(v)) != nullptr; }
  bool number_integer(json::number_integer_t v) { return add(json(v)) != nullptr; }
  bool number_unsigned(json::number_unsigned_t v) { return add(json(v)) != nullptr; }
  bool number_float(json::number_float_t v, const json::string_t& /*text*/) {
    return add(json(v)) != nullptr;
  }
  bool string(json::string_t& v) { return add(json(std::move(v))) != nullptr; }
  bool binary(json::binary_t& /*v*/) {
    error_ = "binary value";  // not in JSON text; nlohmann's CBOR and the like only
    return false;
  }
  bool start_object(std::size_t /*size*/) { return open(json::value_t::object); }
  bool key(json::string_t& name) {
    if (open_.back()->contains(name)) {
      error_ = "duplicate member name";
      return false;
    }
    key_ = std::move(name);
    return true;
  }
  bool end_object() {
    open_.pop_back();
    return true;
  }
  bool start_array(std::size_t /*size*/) { return open(json::value_t::array); }
  bool end_array() {
    open_.pop_back();
    return true;
  }
  bool parse_error(std::size_t position, const std::string& /*token*/,
                   const json::exception& /*e*/) {
    error_ = "not JSON at byte " + std::to_string(position);
    return false;
  }

  [[nodiscard]] const std::string& error() const { return error_; }

 private:
  // Places `v` where the parse stands: the root, the next element of the innermost open array,
  // or the member of the innermost open object named by the last key. Returns where it went.
  json* add(json v) {
    if (open_.empty()) {
      root_ = std::move(v);
      return &root_;
    }
    json* parent = open_.back();
    if (parent->is_array()) {
      parent->push_back(std::move(v));
      return &parent->back();
    }
    json& member = (*parent)[key_];
    member = std::move(v);
    return &member;
  }

  bool open(json::value_t type) {
    if (open_.size() >= max_depth_) {
      error_ = "nested deeper than " + std::to_string(max_depth_);
      return false;
    }
    // A container's address stays valid while it is open: nothing is added to its parent (an
    // array, whose growth would move it) until it is closed.
    open_.push_back(add(json(type)));
    return true;
  }

  json& root_;
  const size_t max_depth_;
  std::vector<json*> open_;
  std::string key_;
  std::string error_;
};

}  // namespace

tl::expected<nlohmann::json, std::string> read_json(std::string_view text, size_t max_depth) {
  try {
    json root;
    bounded_builder builder(root, max_depth);
    if (!json::sax_parse(text.begin(), text.end(), &builder, json::input_format_t::json,
                         /*strict=*/true, /*ignore_comments=*/false)) {
      return tl::unexpected(builder.error().empty() ? std::string("not JSON") : builder.error());
    }
    return root;
  } catch (const std::bad_alloc&) {
    return tl::unexpected(std::string("out of memory"));
  } catch (const std::exception&) {
    // nlohmann's messages quote the text they stopped at: not for a log line.
    return tl::unexpected(std::string("not JSON"));
  }
}

}  // namespace silt::security
