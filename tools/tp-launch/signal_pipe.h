// Turns the signals the launcher cares about (SIGCHLD, SIGINT, SIGTERM, SIGHUP) into bytes on a
// pipe, so the one poll loop that reads the ranks' output also wakes for them: no busy waiting and
// no work inside a signal handler.
#pragma once

#include <vector>

namespace tensorplay::launch {

/// Installs the handlers (once per process) and ignores SIGPIPE, so a closed stdout cannot kill
/// the launcher while ranks run. Throws std::runtime_error when the pipe cannot be made.
void install_signal_pipe();

/// The read end to poll for POLLIN.
int signal_pipe_fd();

/// The signals delivered since the last call, oldest first; empty when none.
std::vector<int> take_pending_signals();

}  // namespace tensorplay::launch
