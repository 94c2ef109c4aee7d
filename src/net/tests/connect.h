// A loopback client socket and a request frame for the network tests.
#pragma once

#include <cstdint>
#include <vector>

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "base/endian.h"

namespace silt::net::testing {

// A client socket connected to 127.0.0.1:`port`, with a 5 s receive timeout.
inline int connect_to(uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  timeval tv{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  return fd;
}

// An ApiVersions v0 request frame (header v1, client id "t").
inline std::vector<uint8_t> api_versions_frame(int32_t correlation_id) {
  std::vector<uint8_t> f(4 + 2 + 2 + 4 + 2 + 1);
  base::store_be<int32_t>(f.data(), static_cast<int32_t>(f.size() - 4));
  base::store_be<int16_t>(f.data() + 4, 18);
  base::store_be<int16_t>(f.data() + 6, 0);
  base::store_be<int32_t>(f.data() + 8, correlation_id);
  base::store_be<int16_t>(f.data() + 12, 1);
  f[14] = 't';
  return f;
}

}  // namespace silt::net::testing
