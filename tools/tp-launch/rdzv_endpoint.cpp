// The elastic rendezvous endpoint and client: line messages over TCP around a RoundKeeper.
#include "rdzv_endpoint.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <map>
#include <stdexcept>
#include <vector>

namespace tensorplay::launch {
namespace {

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void send_line(int fd, const std::string& line) {
  const std::string text = line + "\n";
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::send(fd, text.data() + done, text.size() - done, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // the peer is gone: its connection closes on the next read
    done += static_cast<size_t>(n);
  }
}

sockaddr_in address_of(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(host.c_str(), nullptr, &hints, &found) != 0 || found == nullptr)
    throw std::runtime_error("rendezvous endpoint " + host + ":" + std::to_string(port) +
                             ": cannot resolve " + host);
  sockaddr_in address = *reinterpret_cast<sockaddr_in*>(found->ai_addr);
  ::freeaddrinfo(found);
  address.sin_port = htons(static_cast<uint16_t>(port));
  return address;
}

}  // namespace

// One node's connection at the endpoint.
struct Connection {
  UniqueFd fd;
  std::string buffer, node_id, peer;
  enum class Phase { Idle, Waiting, InRound } phase = Phase::Idle;
  int round = -1;
  bool told_error = false;
};

struct RdzvServer::State {
  explicit State(RdzvConfig config) : keeper(std::move(config)) {}
  RoundKeeper keeper;
  std::vector<std::unique_ptr<Connection>> connections;

  void on_line(Connection& c, const std::string& line, double now) {
    if (line == "FAIL") return keeper.fail(c.node_id, now);
    if (line == "DONE") {  // finished: its connection's end is no failure
      c.node_id.clear();
      c.phase = Connection::Phase::Idle;
      return;
    }
    std::string error;
    const auto request = parse_join(line, error);
    if (request) error = keeper.join(*request, now);
    if (!error.empty()) {
      send_line(c.fd.get(), "ERROR " + error);
      c.fd.reset();
      return;
    }
    c.node_id = request->node_id;
    c.phase = Connection::Phase::Waiting;
  }
  std::string peer_of(const std::string& node_id) const {
    for (const auto& c : connections)
      if (c->node_id == node_id && c->fd) return c->peer;
    return "127.0.0.1";
  }
  // Tells every node what changed: rounds ended, assignments, the job's end.
  void settle(double now) {
    keeper.poll(now);
    if (keeper.wants_new_round()) keeper.end_round(now);
    for (auto& c : connections) {
      if (!c->fd) continue;
      if (!keeper.error().empty()) {
        if (!c->told_error) send_line(c->fd.get(), "ERROR " + keeper.error());
        c->told_error = true;
        continue;
      }
      auto mine = keeper.assignment(c->node_id);
      if (c->phase == Connection::Phase::InRound && (!mine || mine->round != c->round)) {
        send_line(c->fd.get(), "END");
        c->phase = Connection::Phase::Idle;
      } else if (c->phase == Connection::Phase::Waiting && mine) {
        mine->master_addr = peer_of(mine->members.front());
        send_line(c->fd.get(), format_round(*mine));
        c->phase = Connection::Phase::InRound;
        c->round = mine->round;
      }
    }
  }
};

RdzvServer::RdzvServer(const std::string& host, int port, RdzvConfig config)
    : state_(std::make_unique<State>(std::move(config))) {
  listener_.reset(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  const int one = 1;
  ::setsockopt(listener_.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in address = address_of(host, port);
  if (!listener_ ||
      ::bind(listener_.get(), reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
      ::listen(listener_.get(), 64) != 0)
    throw std::runtime_error("rendezvous endpoint " + host + ":" + std::to_string(port) +
                             ": cannot listen: " + std::strerror(errno));
  socklen_t length = sizeof(address);
  ::getsockname(listener_.get(), reinterpret_cast<sockaddr*>(&address), &length);
  port_ = ntohs(address.sin_port);
  thread_ = std::thread([this] { serve(); });
}

RdzvServer::~RdzvServer() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

void RdzvServer::serve() {
  while (!stop_) {
    std::vector<pollfd> fds{{listener_.get(), POLLIN, 0}};
    for (auto& c : state_->connections) fds.push_back({c->fd.get(), POLLIN, 0});
    ::poll(fds.data(), fds.size(), 50);
    const double now = now_seconds();
    if (fds[0].revents & POLLIN) {
      sockaddr_in peer{};
      socklen_t length = sizeof(peer);
      UniqueFd fd(
          ::accept4(listener_.get(), reinterpret_cast<sockaddr*>(&peer), &length, SOCK_CLOEXEC));
      if (fd) {
        char text[INET_ADDRSTRLEN] = "127.0.0.1";
        ::inet_ntop(AF_INET, &peer.sin_addr, text, sizeof(text));
        state_->connections.push_back(std::make_unique<Connection>());
        state_->connections.back()->fd = std::move(fd);
        state_->connections.back()->peer = text;
      }
    }
    for (size_t i = 1; i < fds.size(); ++i) {
      Connection& c = *state_->connections[i - 1];
      if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR)) || !c.fd) continue;
      char chunk[4096];
      const ssize_t n = ::recv(c.fd.get(), chunk, sizeof(chunk), 0);
      if (n <= 0) {  // the node is gone
        if (!c.node_id.empty()) state_->keeper.fail(c.node_id, now);
        c.fd.reset();
        continue;
      }
      c.buffer.append(chunk, static_cast<size_t>(n));
      for (size_t end; c.fd && (end = c.buffer.find('\n')) != std::string::npos;) {
        const std::string line = c.buffer.substr(0, end);
        c.buffer.erase(0, end + 1);
        state_->on_line(c, line, now);
      }
    }
    std::erase_if(state_->connections, [](const auto& c) { return !c->fd; });
    state_->settle(now);
  }
}

RdzvClient::RdzvClient(const std::string& host, int port, double timeout_seconds)
    : endpoint_(host + ":" + std::to_string(port)) {
  const sockaddr_in address = address_of(host, port);
  const double deadline = now_seconds() + timeout_seconds;
  for (;;) {
    socket_.reset(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (::connect(socket_.get(), reinterpret_cast<const sockaddr*>(&address), sizeof(address)) == 0)
      return;
    if (now_seconds() > deadline)
      throw std::runtime_error("rendezvous endpoint " + endpoint_ + " did not answer within " +
                               std::to_string(static_cast<int>(timeout_seconds)) +
                               " s: " + std::strerror(errno));
    ::poll(nullptr, 0, 100);
  }
}

std::optional<std::string> RdzvClient::read_line(double wait_seconds) {
  const double deadline = now_seconds() + wait_seconds;
  for (;;) {
    const size_t end = buffer_.find('\n');
    if (end != std::string::npos) {
      std::string line = buffer_.substr(0, end);
      buffer_.erase(0, end + 1);
      return line;
    }
    const double left = deadline - now_seconds();
    pollfd fd{socket_.get(), POLLIN, 0};
    if (::poll(&fd, 1, left > 0 ? static_cast<int>(left * 1000) + 1 : 0) == 0) return std::nullopt;
    char chunk[4096];
    const ssize_t n = ::recv(socket_.get(), chunk, sizeof(chunk), 0);
    if (n <= 0)
      throw std::runtime_error("rendezvous endpoint " + endpoint_ + " closed the connection");
    buffer_.append(chunk, static_cast<size_t>(n));
  }
}

RoundAssignment RdzvClient::join(const JoinRequest& request, double timeout_seconds) {
  send_line(socket_.get(), format_join(request));
  const double deadline = now_seconds() + timeout_seconds;
  for (;;) {
    const auto line = read_line(std::max(0.0, deadline - now_seconds()));
    if (!line)
      throw std::runtime_error("rendezvous endpoint " + endpoint_ + " gave no round within " +
                               std::to_string(static_cast<int>(timeout_seconds)) + " s");
    if (line->rfind("ERROR ", 0) == 0) throw std::runtime_error(line->substr(6));
    if (auto round = parse_round(*line)) return *round;
    // "END" of a round this node has already left: wait on.
  }
}

bool RdzvClient::round_ended(double wait_seconds) {
  const auto line = read_line(wait_seconds);
  if (!line) return false;
  if (line->rfind("ERROR ", 0) == 0) throw std::runtime_error(line->substr(6));
  return *line == "END";
}

void RdzvClient::report_failure() { send_line(socket_.get(), "FAIL"); }

void RdzvClient::report_done() { send_line(socket_.get(), "DONE"); }

}  // namespace tensorplay::launch
