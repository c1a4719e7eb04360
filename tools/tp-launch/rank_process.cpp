// Starting, signalling and reaping a rank. posix_spawnp, not fork and exec by hand: it reports a
// program that cannot start (ENOENT, EACCES) as an error here instead of as a mystery exit 127.
// A rank that ends stays a zombie until the supervisor is done with its process group.
#include "rank_process.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <string.h>
#include <sys/wait.h>

#include <cerrno>
#include <stdexcept>

namespace tensorplay::launch {
namespace {

std::runtime_error system_error(const std::string& what, int error) {
  return std::runtime_error(what + ": " + ::strerror(error));
}

// Closes the file actions and attributes on every path out of start_rank.
struct SpawnSetup {
  posix_spawn_file_actions_t actions;
  posix_spawnattr_t attributes;
  SpawnSetup() {
    posix_spawn_file_actions_init(&actions);
    posix_spawnattr_init(&attributes);
  }
  ~SpawnSetup() {
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attributes);
  }
};

std::pair<UniqueFd, UniqueFd> make_pipe() {
  int ends[2];
  // Close-on-exec: a rank must not hold another rank's pipe open, or its EOF would never come.
  if (::pipe2(ends, O_CLOEXEC) != 0) throw system_error("pipe", errno);
  return {UniqueFd(ends[0]), UniqueFd(ends[1])};
}

}  // namespace

RankProcess start_rank(int rank, const std::vector<std::string>& program,
                       const std::vector<std::string>& environment) {
  auto [stdout_read, stdout_write] = make_pipe();
  auto [stderr_read, stderr_write] = make_pipe();
  // The launcher reads its pipes from one poll loop, so a read must never block it.
  ::fcntl(stdout_read.get(), F_SETFL, O_NONBLOCK);
  ::fcntl(stderr_read.get(), F_SETFL, O_NONBLOCK);

  SpawnSetup setup;
  posix_spawn_file_actions_addopen(&setup.actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&setup.actions, stdout_write.get(), STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&setup.actions, stderr_write.get(), STDERR_FILENO);

  // Its own process group; the launcher's handled and ignored signals back to their defaults, and
  // nothing blocked, whatever the launcher inherited.
  sigset_t defaults;
  sigset_t empty;
  sigfillset(&defaults);
  sigemptyset(&empty);
  posix_spawnattr_setpgroup(&setup.attributes, 0);
  posix_spawnattr_setsigdefault(&setup.attributes, &defaults);
  posix_spawnattr_setsigmask(&setup.attributes, &empty);
  posix_spawnattr_setflags(&setup.attributes,
                           POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);

  std::vector<char*> argv;
  for (const std::string& arg : program) argv.push_back(const_cast<char*>(arg.c_str()));
  argv.push_back(nullptr);
  std::vector<char*> envp;
  for (const std::string& entry : environment) envp.push_back(const_cast<char*>(entry.c_str()));
  envp.push_back(nullptr);

  RankProcess process;
  process.rank = rank;
  const int error = ::posix_spawnp(&process.pid, argv[0], &setup.actions, &setup.attributes,
                                   argv.data(), envp.data());
  if (error != 0) {
    throw system_error("cannot start '" + program.front() + "' for rank " + std::to_string(rank),
                       error);
  }
  process.stdout_pipe = std::move(stdout_read);
  process.stderr_pipe = std::move(stderr_read);
  return process;  // the write ends close here, so the rank holds the only ones
}

void signal_rank(const RankProcess& process, int signal_number) {
  if (process.reaped || process.pid <= 0) return;
  // ESRCH is fine: the group may be gone while its leader waits to be reaped.
  ::kill(-process.pid, signal_number);
}

bool check_exited(RankProcess& process) {
  if (process.exited) return true;
  // WNOWAIT leaves the zombie: while it exists no new process can get its pid, so signalling its
  // group later (to stop helpers it left running) cannot reach a stranger.
  siginfo_t info{};
  int result;
  do {
    result = ::waitid(P_PID, static_cast<id_t>(process.pid), &info, WEXITED | WNOHANG | WNOWAIT);
  } while (result < 0 && errno == EINTR);
  if (result < 0) {
    // Not our child any more, which cannot happen unless SIGCHLD is ignored: count it failed.
    process.exited = process.reaped = true;
    process.ending = RankEnding{1, 0, false};
  } else if (info.si_pid == process.pid) {
    process.exited = true;
    if (info.si_code == CLD_EXITED) {
      process.ending = RankEnding{info.si_status, 0, false};
    } else {
      process.ending = RankEnding{0, info.si_status, info.si_code == CLD_DUMPED};
    }
  }
  return process.exited;
}

void reap(RankProcess& process) {
  if (process.reaped || !process.exited) return;
  int status = 0;
  while (::waitpid(process.pid, &status, 0) < 0 && errno == EINTR) {
  }
  process.reaped = true;
}

std::string signal_name(int signal_number) {
  if (const char* abbreviation = ::sigabbrev_np(signal_number)) {
    return std::string("SIG") + abbreviation;
  }
  return "signal " + std::to_string(signal_number);
}

std::string RankEnding::describe() const {
  if (signal_number == 0) return "exited with status " + std::to_string(status);
  return "was killed by signal " + signal_name(signal_number) + " (" +
         std::to_string(signal_number) + ")" + (core_dumped ? ", core dumped" : "");
}

}  // namespace tensorplay::launch
