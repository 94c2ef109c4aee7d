// The dispatcher: serves every request the network server hands it by checking its version
// against the supported table, decoding it, running the API's handler and encoding the
// response. Holds the context handlers share, which its owner (app/node.h) keeps
// alive for as long as the server may call handle(): from open until after the server
// stopped. Thread-safe: handle() runs from many connections at once.
#pragma once

#include <cstddef>
#include <cstdint>

#include <boost/asio/awaitable.hpp>

#include "handlers/context.h"
#include "net/server.h"
#include "protocol/request_header.h"

namespace silt::handlers {

class dispatcher final : public net::request_handler {
 public:
  explicit dispatcher(context& ctx) : ctx_(ctx) {}
  dispatcher(const dispatcher&) = delete;
  dispatcher& operator=(const dispatcher&) = delete;

  boost::asio::awaitable<net::response> handle(net::request req) override;

 private:
  context& ctx_;
};

// Encodes a response with the header version its request calls for (size prefix included).
// Record data of `zero_copy_threshold` bytes or more is referenced, not copied.
template <typename Resp>
[[nodiscard]] net::response encode_response(const protocol::parsed_request_header& h, const Resp& r,
                                            size_t zero_copy_threshold = SIZE_MAX);

}  // namespace silt::handlers
