// A process that is not part of a job but reaches its rendezvous port: sends raw garbage over
// TCP, then, speaking CAF, says hello with a wrong and with no cluster token, offers a collective
// contribution and asks for a clock sample. Exits 0 when every attempt was refused.
// Usage: intruder HOST PORT
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <caf/io/all.hpp>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "tensorplay/wire/detail/caf_messages.h"
#include "tensorplay/wire/detail/caf_system.h"

namespace pd = tensorplay::pipelining::detail;

namespace {

bool send_garbage(const std::string& host, int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  ::inet_pton(AF_INET, host.c_str(), &address.sin_addr);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
    ::close(fd);
    return false;
  }
  std::mt19937 random(42);
  std::vector<unsigned char> bytes(64 * 1024);
  for (auto& b : bytes) b = static_cast<unsigned char>(random());
  ssize_t sent = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
  ::close(fd);
  return sent > 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: intruder HOST PORT\n");
    return 2;
  }
  const std::string host = argv[1];
  const int port = std::stoi(argv[2]);
  int failures = 0;
  std::printf("intruder: raw garbage %s\n", send_garbage(host, port) ? "sent" : "NOT sent");

  caf::actor_system& system = pd::process_actor_system();
  auto root = system.middleman().remote_actor(host, static_cast<uint16_t>(port));
  if (!root) {
    std::printf("intruder: cannot reach %s:%d: %s\n", host.c_str(), port,
                system.render(root.error()).c_str());
    return 1;
  }
  caf::scoped_actor self{system};
  for (std::string token : {std::string("not-the-token"), std::string()}) {
    pd::PeerEntry me;
    me.rank = 1;
    me.world_size = 4;
    me.host = "127.0.0.1";
    me.token = token;
    me.actor = caf::actor_cast<caf::actor>(self);
    bool refused = false;
    self->request(*root, std::chrono::seconds(5), pd::hello_atom::value, me)
        .receive(
            [&](const std::vector<pd::PeerEntry>& table, const std::string& why) {
              refused = table.empty() && !why.empty();
              std::printf("intruder: hello with %s token: %s\n", token.empty() ? "no" : "a wrong",
                          refused ? why.c_str() : "ACCEPTED");
            },
            [&](const caf::error& e) {
              refused = true;
              std::printf("intruder: hello refused: %s\n", system.render(e).c_str());
            });
    if (!refused) ++failures;
  }
  pd::Contribution forged{0x1234, 1, std::string(1024, 'x'), {}};
  self->send(*root, pd::collective_atom::value, forged);
  bool answered = false;
  self->request(*root, std::chrono::seconds(5), pd::ping_atom::value)
      .receive([&](int64_t) { answered = true; }, [&](const caf::error&) {});
  std::printf("intruder: clock sample %s\n", answered ? "ANSWERED" : "refused");
  if (answered) ++failures;
  std::fflush(stdout);
  // Quick exit: the connection closes with the process (CAF's system is never torn down here).
  std::_Exit(failures == 0 ? 0 : 1);
}
