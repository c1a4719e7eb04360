// One rank's child process: started in a process group of its own, with stdin from /dev/null and
// stdout and stderr into pipes the launcher reads. Signals go to the whole group, so helpers the
// rank started (a shell's children, say) stop with it. A rank dies with the launcher (a
// parent-death signal), even when the launcher is killed with SIGKILL.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "unique_fd.h"

namespace tensorplay::launch {

/// How a rank ended: exited with `status`, or was killed by `signal_number`.
struct RankEnding {
  int status = 0;
  int signal_number = 0;  ///< non-zero when killed by a signal
  bool core_dumped = false;

  bool succeeded() const { return signal_number == 0 && status == 0; }
  /// The launcher's exit code for it: the status, or 128 + the signal, as a shell reports it.
  int exit_code() const { return signal_number != 0 ? 128 + signal_number : status; }
  /// "exited with status 3" or "was killed by signal SIGKILL (9)".
  std::string describe() const;
};

struct RankProcess {
  int rank = 0;          ///< global rank
  pid_t pid = -1;        ///< also the id of its process group
  UniqueFd stdout_pipe;  ///< read end of its stdout
  UniqueFd stderr_pipe;  ///< read end of its stderr
  bool exited = false;   ///< seen to end; kept a zombie so its pid and group id stay ours
  bool reaped = false;   ///< waited for: its pid (and group id) may now belong to another
  RankEnding ending;     ///< how it ended, once exited
};

/// Starts `program` (searched in PATH) as `rank` with `environment`; the rank gets SIGKILL when the
/// launcher dies. Call from the launcher's main thread only (the parent-death signal follows the
/// thread that forked). Throws std::runtime_error, naming the program and the reason, when it
/// cannot be started.
RankProcess start_rank(int rank, const std::vector<std::string>& program,
                       const std::vector<std::string>& environment);

/// Sends `signal_number` to the rank's process group (helpers left behind by a rank that has
/// exited included), unless the rank has been reaped.
void signal_rank(const RankProcess& process, int signal_number);

/// Notes whether the rank has exited, without blocking and without reaping it; returns `exited`.
bool check_exited(RankProcess& process);

/// Reaps a rank that has exited; from then on its group is no longer signalled.
void reap(RankProcess& process);

/// "SIGTERM" for 15, or "signal 15" where the name is unknown.
std::string signal_name(int signal_number);

}  // namespace tensorplay::launch
