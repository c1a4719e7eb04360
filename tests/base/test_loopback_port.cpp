// Tests for loopback_port.h: the port lies below the kernel's ephemeral range, where other
// programs' outgoing connections cannot take it, and can be bound.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <fstream>

#include "tensorplay/base/loopback_port.h"

TEST_CASE("a free loopback port lies below the ephemeral range and can be bound",
          "[loopback_port]") {
  int low = 32768, high = 60999;
  std::ifstream("/proc/sys/net/ipv4/ip_local_port_range") >> low >> high;
  for (int i = 0; i < 20; ++i) {
    const int port = tensorplay::free_loopback_port();
    INFO("port " << port << ", ephemeral range " << low << "-" << high);
    CHECK(port >= 1024);
    // A port from the ephemeral range (the kernel's bind(0), as before) could be taken by any
    // process's outgoing connection before the rendezvous binds it: a test then failed with
    // "could not listen" while other tests ran beside it.
    CHECK(port < std::max(low, 21000));
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    REQUIRE(fd >= 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    address.sin_port = htons(static_cast<uint16_t>(port));
    CHECK(::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0);
    ::close(fd);
  }
}
