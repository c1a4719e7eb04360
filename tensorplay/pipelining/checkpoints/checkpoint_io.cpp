// Checkpoint file handling: step folders, atomic writes, dead writers' temporary files, checksums.
#include "tensorplay/pipelining/checkpoints/checkpoint_io.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "tensorplay/pipelining/checkpoints/checkpoint_error.h"

namespace tensorplay::pipelining::checkpoint_io {
namespace {

namespace fs = std::filesystem;

constexpr const char* kStepPrefix = "step_";

// Temporary files are named "<file>.tmp.<host>.<pid>" after their writer, so that a later save or
// load can tell the files of a writer that died (killed mid-write, by SIGXFSZ or the OOM killer)
// from those of one still writing, on this host or, in a shared folder, on another.
constexpr const char* kTempInfix = ".tmp.";

std::string this_host() {
  char name[256] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0 || name[0] == '\0') return "localhost";
  return name;
}

std::string temp_name(const std::string& path) {
  return path + kTempInfix + this_host() + "." + std::to_string(::getpid());
}

// True when `name` is a temporary file whose writer is known to be gone: written on this host (or
// by an older version, which named it "<file>.tmp.<pid>", and untouched for an hour) by a
// process that no longer exists. A live process's file, this process's, or another host's is
// never taken.
bool left_by_dead_writer(const fs::directory_entry& entry) {
  const std::string name = entry.path().filename().string();
  const size_t infix = name.find(kTempInfix);
  if (infix == std::string::npos) return false;
  const std::string rest = name.substr(infix + std::strlen(kTempInfix));
  const size_t dot = rest.rfind('.');
  const std::string host = dot == std::string::npos ? "" : rest.substr(0, dot);
  const std::string digits = dot == std::string::npos ? rest : rest.substr(dot + 1);
  if (digits.empty() || digits.size() > 9 ||
      !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return false;
  const pid_t pid = static_cast<pid_t>(std::stol(digits));
  if (pid <= 0 || pid == ::getpid()) return false;
  if (::kill(pid, 0) == 0 || errno != ESRCH) return false;  // alive (or not ours to signal)
  if (!host.empty()) return host == this_host();
  std::error_code ec;
  const auto written = fs::last_write_time(entry.path(), ec);
  return !ec && fs::file_time_type::clock::now() - written > std::chrono::hours(1);
}

}  // namespace

std::string step_folder(const std::string& dir, int64_t step) {
  char name[32];
  std::snprintf(name, sizeof(name), "step_%08lld", static_cast<long long>(step));
  return (fs::path(dir) / name).string();
}

bool parse_step_name(const std::string& name, int64_t& step) {
  if (name.rfind(kStepPrefix, 0) != 0 || name.size() == std::strlen(kStepPrefix)) return false;
  const std::string digits = name.substr(std::strlen(kStepPrefix));
  if (digits.size() > 18 ||
      !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return false;
  step = std::stoll(digits);
  return true;
}

[[noreturn]] void throw_errno(const std::string& what, const std::string& path) {
  const int error = errno;
  const bool full = error == ENOSPC || error == EFBIG || error == EDQUOT;
  throw CheckpointError("checkpoint: cannot " + what + " '" + path + "': " + std::strerror(error) +
                        (full ? " (free space or raise the file-size limit, or save to another "
                                "folder)"
                              : ""));
}

void fsync_folder(const std::string& folder) {
  int fd = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd < 0) throw_errno("open folder", folder);
  int rc = ::fsync(fd);
  ::close(fd);
  if (rc != 0) throw_errno("flush folder", folder);
}

void write_atomically(const std::string& path,
                      const std::vector<std::pair<const void*, size_t>>& parts) {
  const std::string tmp = temp_name(path);
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw_errno("create", tmp);
  auto fail = [&](const char* what, bool close_it) {
    const int error = errno;
    if (close_it) ::close(fd);
    ::unlink(tmp.c_str());
    errno = error;
    throw_errno(what, path);
  };
  for (const auto& [data, size] : parts) {
    const auto* bytes = static_cast<const char*>(data);
    size_t done = 0;
    while (done < size) {
      ssize_t n = ::write(fd, bytes + done, size - done);
      if (n < 0 && errno == EINTR) continue;
      if (n == 0) errno = ENOSPC;  // no progress: the device took nothing
      if (n <= 0) fail("write", true);
      done += static_cast<size_t>(n);
    }
  }
  if (::fsync(fd) != 0) fail("flush", true);
  if (::close(fd) != 0) fail("close", false);
  if (::rename(tmp.c_str(), path.c_str()) != 0) fail("rename into place", false);
  fsync_folder(fs::path(path).parent_path().string());
}

std::string read_whole(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw CheckpointError("checkpoint: cannot open '" + path + "'");
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

std::string generator_state(Generator& generator) {
  auto guard = generator.lock();
  std::ostringstream os;
  os << generator.engine();
  return os.str();
}

bool restore_generator_state(Generator& generator, const std::string& state) {
  std::istringstream is(state);
  std::mt19937_64 engine;
  is >> engine;
  if (!is) return false;
  auto guard = generator.lock();
  generator.engine() = engine;
  return true;
}

void remove_dead_writers_files(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return;
  auto clean = [](const fs::path& folder) {
    std::error_code ec;
    for (const fs::directory_entry& entry : fs::directory_iterator(folder, ec))
      if (entry.is_regular_file(ec) && left_by_dead_writer(entry)) fs::remove(entry.path(), ec);
  };
  clean(dir);
  for (const fs::directory_entry& entry : fs::directory_iterator(dir, ec)) {
    int64_t step = 0;
    if (entry.is_directory(ec) && parse_step_name(entry.path().filename().string(), step))
      clean(entry.path());
  }
}

}  // namespace tensorplay::pipelining::checkpoint_io
