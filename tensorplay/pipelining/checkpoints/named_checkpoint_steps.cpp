// Scanning layout-free checkpoint step folders and the argument checks of save and load.
#include "tensorplay/pipelining/checkpoints/named_checkpoint_steps.h"

#include <algorithm>
#include <filesystem>
#include <set>

#include "tensorplay/pipelining/checkpoints/checkpoint_error.h"
#include "tensorplay/pipelining/checkpoints/checkpoint_io.h"

namespace tensorplay::pipelining {
namespace {

namespace fs = std::filesystem;

bool is_index_name(const std::string& name) {
  return name.rfind("index_", 0) == 0 && name.size() > 10 &&
         name.compare(name.size() - 4, 4, ".txt") == 0 && name.find(".tmp.") == std::string::npos;
}

bool has_index(const fs::path& folder) {
  std::error_code ec;
  for (const fs::directory_entry& file : fs::directory_iterator(folder, ec))
    if (is_index_name(file.path().filename().string())) return true;
  return false;
}

}  // namespace

NamedStep read_named_step(const std::string& folder) {
  NamedStep step;
  step.folder = folder;
  std::vector<std::pair<CheckpointIndex, std::string>> found;
  std::error_code ec;
  for (const fs::directory_entry& file : fs::directory_iterator(folder, ec)) {
    if (!is_index_name(file.path().filename().string())) continue;
    const std::string path = file.path().string();
    try {
      found.emplace_back(parse_index(checkpoint_io::read_whole(path), path), path);
    } catch (const CheckpointError& e) {
      step.damaged.push_back(e.what());
    }
  }
  std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) {
    return a.first.stages.front() < b.first.stages.front();
  });
  for (auto& [index, path] : found) {
    step.indexes.push_back(std::move(index));
    step.paths.push_back(std::move(path));
  }
  return step;
}

std::string NamedStep::why_incomplete() const {
  if (!damaged.empty()) return damaged.front();
  if (indexes.empty()) return "no index in '" + folder + "'";
  const int count = indexes.front().num_stages;
  std::vector<int> seen(static_cast<size_t>(count), 0);
  for (size_t i = 0; i < indexes.size(); ++i) {
    if (indexes[i].num_stages != count)
      return "its indexes disagree on the stage count ('" + paths[i] + "' says " +
             std::to_string(indexes[i].num_stages) + ", '" + paths.front() + "' " +
             std::to_string(count) + ")";
    if (indexes[i].step != indexes.front().step)
      return "index '" + paths[i] + "' is of step " + std::to_string(indexes[i].step);
    for (int s : indexes[i].stages)
      if (seen[static_cast<size_t>(s)]++ > 0)
        return "stage " + std::to_string(s) + " is in two indexes (two writers saved it)";
  }
  std::string missing;
  for (int s = 0; s < count; ++s)
    if (seen[static_cast<size_t>(s)] == 0)
      missing += (missing.empty() ? "" : ", ") + std::to_string(s);
  if (!missing.empty())
    return "incomplete: no index covers stage " + missing + " of " + std::to_string(count) +
           " (a writer stopped while saving)";
  return "";
}

bool NamedStep::complete() const { return why_incomplete().empty(); }

NamedCheckpointInfo NamedStep::info() const {
  NamedCheckpointInfo info;
  if (indexes.empty()) return info;
  const CheckpointIndex& first = indexes.front();
  info.step = first.step;
  info.samples_consumed = first.samples_consumed;
  info.num_stages = first.num_stages;
  info.layout = first.layout;
  info.version = 3;
  return info;
}

std::map<int64_t, std::string> named_step_folders(const std::string& dir) {
  std::map<int64_t, std::string> steps;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return steps;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir, ec)) {
    int64_t step = 0;
    if (entry.is_directory(ec) &&
        checkpoint_io::parse_step_name(entry.path().filename().string(), step) &&
        has_index(entry.path()))
      steps[step] = entry.path().string();
  }
  return steps;
}

int checked_stage_count(const std::vector<std::shared_ptr<PipelineStage>>& stages) {
  if (stages.empty()) throw CheckpointError("checkpoint: no stages given");
  for (const auto& stage : stages)
    if (!stage) throw CheckpointError("checkpoint: a null stage was given");
  const int count = stages.front()->num_stages();
  for (const auto& stage : stages)
    if (stage->num_stages() != count)
      throw CheckpointError("checkpoint: the stages given belong to pipelines of " +
                            std::to_string(count) + " and " + std::to_string(stage->num_stages()) +
                            " stages; pass the stages of one pipeline");
  return count;
}

std::vector<std::pair<std::string, Generator*>> checked_generators(
    const std::vector<std::pair<std::string, Generator*>>& extra) {
  std::vector<std::pair<std::string, Generator*>> all{{"default", &default_generator()}};
  std::set<std::string> names{"default"};
  for (const auto& [name, generator] : extra) {
    if (generator == nullptr || generator == &default_generator() || !names.insert(name).second)
      throw CheckpointError("checkpoint: generator '" + name +
                            "' is null, the default generator (which is always saved), or named "
                            "twice; name each extra generator once");
    all.emplace_back(name, generator);
  }
  return all;
}

}  // namespace tensorplay::pipelining
