// train_gpt's --checkpoint-dir: claimed before any work (writable, and an earlier run's
// checkpoints kept unless --overwrite), its step folders listed and named in messages.
#include "checkpoint_dir.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <utility>

#include "tensorplay/distributed/launch_env.h"
#include "tensorplay/pipelining/checkpoints/checkpoint_io.h"

namespace train_gpt {

namespace pp = tensorplay::pipelining;
namespace dist = tensorplay::distributed;

bool resumes_by_itself(const Options& o) {
  return dist::read_launch_env().restart_count > 0 || o.pp_auto || o.dp_auto;
}

namespace {

// The checkpoint folders (step_NNNNNNNN, complete or not) under `dir` by step, in increasing
// order.
std::vector<std::pair<int64_t, std::filesystem::path>> checkpoint_folders(const std::string& dir) {
  std::vector<std::pair<int64_t, std::filesystem::path>> folders;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    int64_t step = 0;
    if (entry.is_directory() &&
        pp::checkpoint_io::parse_step_name(entry.path().filename().string(), step))
      folders.push_back({step, entry.path()});
  }
  std::sort(folders.begin(), folders.end());
  return folders;
}

}  // namespace

std::vector<int64_t> checkpoint_folder_steps(const std::string& dir) {
  std::vector<int64_t> steps;
  for (const auto& [step, path] : checkpoint_folders(dir)) steps.push_back(step);
  return steps;
}

std::string steps_text(const std::vector<int64_t>& steps) {
  std::string out = steps.size() == 1 ? "step " : "steps ";
  const size_t from = steps.size() > 6 ? steps.size() - 6 : 0;
  if (from > 0) out += "..., ";
  for (size_t i = from; i < steps.size(); ++i)
    out += std::to_string(steps[i]) + (i + 2 == steps.size()   ? " and "
                                       : i + 1 == steps.size() ? ""
                                                               : ", ");
  return out;
}

void claim_checkpoint_dir(const Options& o, int rank) {
  const std::string& dir = o.checkpoint_dir;
  const std::string fix =
      "; pass a --checkpoint-dir you can write (or --checkpoint-dir '' for no checkpoints)";
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec)
    throw std::invalid_argument("--checkpoint-dir " + dir + ": cannot create it (" + ec.message() +
                                ")" + fix);
  if (!std::filesystem::is_directory(dir))
    throw std::invalid_argument("--checkpoint-dir " + dir + " is a file, not a folder" + fix);
  const std::string probe =
      (std::filesystem::path(dir) / (".write_check." + std::to_string(::getpid()))).string();
  if (!std::ofstream(probe))
    throw std::invalid_argument("--checkpoint-dir " + dir + ": cannot write in it (" +
                                std::strerror(errno) + ")" + fix);
  std::filesystem::remove(probe, ec);
  if (o.resume || resumes_by_itself(o)) return;
  const std::vector<int64_t> steps = checkpoint_folder_steps(dir);
  if (steps.empty()) return;
  if (!o.overwrite)
    throw std::invalid_argument(
        "--checkpoint-dir " + dir + " holds the checkpoints of an earlier run (" +
        steps_text(steps) + "), which this run would overwrite: pass --resume to continue it, " +
        "--overwrite to delete them and start over, or another --checkpoint-dir");
  if (rank != 0) return;
  for (const auto& [step, path] : checkpoint_folders(dir)) std::filesystem::remove_all(path);
  std::printf("--overwrite: deleted the checkpoints of %s in %s\n", steps_text(steps).c_str(),
              dir.c_str());
}

}  // namespace train_gpt
