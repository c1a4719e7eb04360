// The self-pipe trick: each handler writes its signal number as one byte to a non-blocking pipe,
// the only thing it may safely do; the poll loop reads the bytes back. A full pipe drops bytes,
// which loses nothing: every reader reaps all exited ranks, not one per byte.
#include "signal_pipe.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>

namespace tensorplay::launch {
namespace {

int pipe_ends[2] = {-1, -1};

void on_signal(int signal_number) {
  const int saved_errno = errno;
  const unsigned char byte = static_cast<unsigned char>(signal_number);
  [[maybe_unused]] ssize_t ignored = ::write(pipe_ends[1], &byte, 1);
  errno = saved_errno;
}

}  // namespace

void install_signal_pipe() {
  if (pipe_ends[0] >= 0) return;
  if (::pipe2(pipe_ends, O_CLOEXEC | O_NONBLOCK) != 0) {
    throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
  }
  struct sigaction action {};
  action.sa_handler = on_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART | SA_NOCLDSTOP;
  sigset_t handled;
  sigemptyset(&handled);
  for (int signal_number : {SIGCHLD, SIGINT, SIGTERM, SIGHUP}) {
    // A launcher started with SIGINT or SIGHUP ignored (a background job, nohup) keeps them so.
    struct sigaction current {};
    ::sigaction(signal_number, nullptr, &current);
    if (current.sa_handler == SIG_IGN && signal_number != SIGCHLD && signal_number != SIGTERM) {
      continue;
    }
    ::sigaction(signal_number, &action, nullptr);
    sigaddset(&handled, signal_number);
  }
  ::sigprocmask(SIG_UNBLOCK, &handled, nullptr);
  ::signal(SIGPIPE, SIG_IGN);
}

int signal_pipe_fd() { return pipe_ends[0]; }

std::vector<int> take_pending_signals() {
  std::vector<int> signals;
  unsigned char bytes[64];
  ssize_t count;
  while ((count = ::read(pipe_ends[0], bytes, sizeof(bytes))) > 0 ||
         (count < 0 && errno == EINTR)) {
    for (ssize_t i = 0; i < count; ++i) signals.push_back(bytes[i]);
  }
  return signals;
}

}  // namespace tensorplay::launch
