// Free loopback ports below the ephemeral range: random candidates, each checked by a bind.
#include "tensorplay/base/loopback_port.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>

namespace tensorplay::inline base {
namespace {

// The kernel's ephemeral range (from /proc, else Linux's default).
std::pair<int, int> ephemeral_range() {
  std::ifstream range("/proc/sys/net/ipv4/ip_local_port_range");
  int low = 32768, high = 60999;
  if (!(range >> low >> high) || low < 1 || high > 65535 || low > high) return {32768, 60999};
  return {low, high};
}

bool port_is_free(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    throw std::runtime_error(std::string("free_loopback_port: socket: ") + std::strerror(errno));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(static_cast<uint16_t>(port));
  const bool bound = ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0;
  ::close(fd);
  return bound;
}

}  // namespace

int free_loopback_port() {
  const int first = 20000, last = std::max(first + 1000, ephemeral_range().first) - 1;
  std::random_device random;
  for (int attempt = 0; attempt < 200; ++attempt) {
    const int port = first + static_cast<int>(random() % static_cast<unsigned>(last - first + 1));
    if (port_is_free(port)) return port;
  }
  throw std::runtime_error("free_loopback_port: no free port on 127.0.0.1 in " +
                           std::to_string(first) + "-" + std::to_string(last));
}

}  // namespace tensorplay::inline base
