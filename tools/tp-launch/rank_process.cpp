// Starting, signalling and reaping a rank. fork and exec by hand, not posix_spawnp: the child must
// ask for a parent-death signal (prctl) between the two, which posix_spawn cannot do. A program
// that cannot start (ENOENT, EACCES) is still reported as an error here, through a close-on-exec
// pipe, instead of as a mystery exit 127. A rank that ends stays a zombie until the supervisor is
// done with its process group.
#include "rank_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <stdexcept>

namespace tensorplay::launch {
namespace {

// How long a started child may take to exec its program before it is taken as running.
constexpr std::chrono::seconds kExecLimit{10};

std::runtime_error system_error(const std::string& what, int error) {
  return std::runtime_error(what + ": " + ::strerror(error));
}

std::pair<UniqueFd, UniqueFd> make_pipe() {
  int ends[2];
  // Close-on-exec: a rank must not hold another rank's pipe open, or its EOF would never come.
  if (::pipe2(ends, O_CLOEXEC) != 0) throw system_error("pipe", errno);
  return {UniqueFd(ends[0]), UniqueFd(ends[1])};
}

// Makes `fd` the child's descriptor `target`, kept open across exec.
bool move_to(int fd, int target) {
  if (fd == target) return ::fcntl(fd, F_SETFD, 0) == 0;  // dup2 would keep close-on-exec
  return ::dup2(fd, target) == target;
}

// Runs in the child between fork and exec, so it calls only async-signal-safe functions. Reports
// the errno of the step that failed on `error_pipe` and exits 127; returns only through exec.
[[noreturn]] void become_rank(pid_t launcher, int stdout_fd, int stderr_fd, int error_pipe,
                              char* const* argv, char* const* envp) {
  // The launcher's handlers back to their defaults (its signal pipe is not ours to write),
  // then nothing blocked, whatever the launcher inherited.
  for (int signal_number = 1; signal_number < NSIG; ++signal_number) {
    if (signal_number != SIGKILL && signal_number != SIGSTOP) ::signal(signal_number, SIG_DFL);
  }
  sigset_t empty;
  sigemptyset(&empty);
  ::sigprocmask(SIG_SETMASK, &empty, nullptr);

  int error = 0;
  // Its own process group, so that stopping a rank reaches the helpers it starts.
  if (::setpgid(0, 0) != 0) error = errno;
  // Dies with the launcher, even by SIGKILL: SIGKILL, because nobody is left to escalate to it
  // after a grace period, and a rank that handles SIGTERM would live on with its output lost.
  // The setting survives exec (except into a set-user-ID program). The launcher may have died
  // before prctl ran: then this process already has a new parent, and must not go on.
  if (error == 0 && ::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) error = errno;
  if (error == 0 && ::getppid() != launcher) ::_exit(128 + SIGKILL);
  if (error == 0) {
    const int null_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (null_fd < 0 || !move_to(null_fd, STDIN_FILENO) || !move_to(stdout_fd, STDOUT_FILENO) ||
        !move_to(stderr_fd, STDERR_FILENO)) {
      error = errno;
    }
  }
  if (error == 0) {
    ::execvpe(argv[0], argv, envp);
    error = errno;
  }
  [[maybe_unused]] ssize_t ignored = ::write(error_pipe, &error, sizeof(error));
  ::_exit(127);
}

// The errno a forked child reports on `error_pipe` when its exec failed; 0 once the pipe closes
// (exec succeeded) or when the child neither execs nor fails within kExecLimit (a stalled file
// system: taken as started, and the supervisor reports how it ends).
int exec_error(int error_pipe) {
  int child_error = 0;
  ssize_t count = -1;
  pollfd readable{error_pipe, POLLIN, 0};
  const auto deadline = std::chrono::steady_clock::now() + kExecLimit;
  while (std::chrono::steady_clock::now() < deadline) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    const int ready = ::poll(&readable, 1, static_cast<int>(left.count()) + 1);
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) break;
    count = ::read(error_pipe, &child_error, sizeof(child_error));
    if (count >= 0 || errno != EINTR) break;
  }
  return count > 0 ? child_error : 0;
}

}  // namespace

RankProcess start_rank(int rank, const std::vector<std::string>& program,
                       const std::vector<std::string>& environment) {
  // PR_SET_PDEATHSIG fires when the *thread* that forked ends, not the process: ranks forked
  // from a helper thread would be killed when that thread exits. The launcher has one thread.
  if (::gettid() != ::getpid()) {
    throw std::logic_error("start_rank must run on the launcher's main thread");
  }
  auto [stdout_read, stdout_write] = make_pipe();
  auto [stderr_read, stderr_write] = make_pipe();
  auto [error_read, error_write] = make_pipe();
  // The launcher reads its pipes from one poll loop, so a read must never block it.
  ::fcntl(stdout_read.get(), F_SETFL, O_NONBLOCK);
  ::fcntl(stderr_read.get(), F_SETFL, O_NONBLOCK);

  // Everything the child needs is built before fork: it must not allocate.
  std::vector<char*> argv;
  for (const std::string& arg : program) argv.push_back(const_cast<char*>(arg.c_str()));
  argv.push_back(nullptr);
  std::vector<char*> envp;
  for (const std::string& entry : environment) envp.push_back(const_cast<char*>(entry.c_str()));
  envp.push_back(nullptr);

  // No signal handler may run in the child before it has reset them all.
  sigset_t all;
  sigset_t previous;
  sigfillset(&all);
  ::sigprocmask(SIG_SETMASK, &all, &previous);
  const pid_t launcher = ::getpid();
  const pid_t pid = ::fork();
  if (pid == 0) {
    become_rank(launcher, stdout_write.get(), stderr_write.get(), error_write.get(), argv.data(),
                envp.data());
  }
  const int fork_error = errno;
  // The child's group is set on both sides, so that it exists once fork returns here, before the
  // child has run (an error means the child has set it and may have exec'd already).
  if (pid > 0) ::setpgid(pid, pid);
  ::sigprocmask(SIG_SETMASK, &previous, nullptr);
  const std::string what =
      "cannot start '" + program.front() + "' for rank " + std::to_string(rank);
  if (pid < 0) throw system_error(what, fork_error);

  // The child's copy of the write end closes at exec: end of file means the program runs. A
  // child that neither execs nor fails within the limit (a stalled file system) is taken as
  // started; the supervisor reports how it ends.
  error_write.reset();
  if (const int child_error = exec_error(error_read.get())) {
    while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
    }
    throw system_error(what, child_error);
  }

  RankProcess process;
  process.rank = rank;
  process.pid = pid;
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
