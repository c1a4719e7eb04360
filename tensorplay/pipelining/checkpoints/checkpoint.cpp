// Pipeline checkpoints: per-stage files written atomically, completion markers, and loading the
// newest complete step back into stages, optimizer and generators.
#include "tensorplay/pipelining/checkpoints/checkpoint.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <unordered_map>

#include "tensorplay/core/serialize.h"
#include "tensorplay/pipelining/checkpoints/checkpoint_io.h"

namespace tensorplay::pipelining {
namespace {

namespace fs = std::filesystem;

using namespace checkpoint_io;

std::string stage_file(const std::string& folder, int stage) {
  return (fs::path(folder) / ("stage_" + std::to_string(stage) + ".tpsd")).string();
}
std::string marker_file(const std::string& folder, int stage) {
  return (fs::path(folder) / ("stage_" + std::to_string(stage) + ".done")).string();
}

// Text (a step count, a generator state) as a float32 tensor of its bytes: every byte value is
// exact in float32, and the tensor file format needs no change.
Tensor text_tensor(const std::string& text) {
  std::vector<float> values(text.begin(), text.end());
  for (size_t i = 0; i < text.size(); ++i) values[i] = static_cast<unsigned char>(text[i]);
  return from_vector(values, {static_cast<int64_t>(values.size())});
}
std::string tensor_text(const Tensor& tensor) {
  std::string text;
  for (float v : tensor.to_vector()) text.push_back(static_cast<char>(static_cast<int>(v)));
  return text;
}

void restore_generator(Generator& generator, const std::string& state, const std::string& file,
                       const std::string& name) {
  if (!restore_generator_state(generator, state))
    throw CheckpointError("checkpoint '" + file + "': generator state '" + name +
                          "' does not parse (the file is damaged: pass an earlier step)");
}

std::vector<std::pair<std::string, Generator*>> all_generators(const CheckpointOptions& options) {
  std::vector<std::pair<std::string, Generator*>> generators{{"default", &default_generator()}};
  for (const auto& [name, generator] : options.generators) {
    if (generator == nullptr || name == "default" || generator == &default_generator())
      throw CheckpointError("checkpoint: generator '" + name +
                            "' is null or the default generator (which is always saved); name "
                            "each extra generator once");
    generators.emplace_back(name, generator);
  }
  return generators;
}

// Optimizer parameter index by tensor identity.
std::unordered_map<const TensorImpl*, size_t> parameter_indices(const optim::Optimizer& opt) {
  std::unordered_map<const TensorImpl*, size_t> index;
  for (size_t i = 0; i < opt.parameters().size(); ++i)
    index[opt.parameters()[i].impl_ptr().get()] = i;
  return index;
}

struct Marker {
  size_t bytes = 0;
  uint64_t checksum = 0;
};

std::string marker_text(int stage, int num_stages, int64_t step, const std::string& bytes) {
  char line[160];
  std::snprintf(line, sizeof(line), "stage %d of %d\nstep %lld\nbytes %zu\nfnv1a64 %016llx\n",
                stage, num_stages, static_cast<long long>(step), bytes.size(),
                static_cast<unsigned long long>(fnv1a64(bytes)));
  return line;
}

Marker read_marker(const std::string& path) {
  std::istringstream in(read_whole(path));
  Marker marker;
  std::string key, value;
  bool has_bytes = false, has_sum = false;
  while (in >> key) {
    if (key == "bytes" && (in >> marker.bytes)) {
      has_bytes = true;
    } else if (key == "fnv1a64" && (in >> value)) {
      marker.checksum = std::stoull(value, nullptr, 16);
      has_sum = true;
    }
  }
  if (!has_bytes || !has_sum)
    throw CheckpointError("checkpoint marker '" + path +
                          "' is damaged (no size or checksum line): pass an earlier step");
  return marker;
}

// What a step folder holds: whether every marker of a pipeline of `num_stages` is there, and the
// stage count its markers say it was saved by (0 when no marker says).
struct StepFolder {
  bool complete = false;
  int saved_stages = 0;
  bool complete_as_saved = false;  // every marker of `saved_stages` is there
};

// The stage count a marker says ("stage S of N"), or 0.
int marker_stage_count(const std::string& path) {
  std::ifstream in(path);
  std::string word_stage, word_of;
  int stage = -1, count = 0;
  if (in >> word_stage >> stage >> word_of >> count && word_stage == "stage" && word_of == "of" &&
      count > 0)
    return count;
  return 0;
}

// Every step folder under `dir`. A step counts as complete for `num_stages` only when its
// markers are all there and were written by a pipeline of that many stages.
std::map<int64_t, StepFolder> scan_steps(const std::string& dir, int num_stages) {
  std::map<int64_t, StepFolder> steps;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return steps;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir, ec)) {
    int64_t step = 0;
    if (!entry.is_directory() || !parse_step_name(entry.path().filename().string(), step)) continue;
    const std::string folder = entry.path().string();
    StepFolder found;
    for (int s = 0; found.saved_stages == 0 && fs::exists(marker_file(folder, s)); ++s)
      found.saved_stages = marker_stage_count(marker_file(folder, s));
    if (found.saved_stages == 0)  // the first markers may be missing: look for any
      for (const fs::directory_entry& file : fs::directory_iterator(folder, ec))
        if (file.path().extension() == ".done" && found.saved_stages == 0)
          found.saved_stages = marker_stage_count(file.path().string());
    auto all_markers = [&](int count) {
      for (int s = 0; s < count; ++s)
        if (!fs::exists(marker_file(folder, s))) return false;
      return count > 0;
    };
    found.complete =
        (found.saved_stages == 0 || found.saved_stages == num_stages) && all_markers(num_stages);
    found.complete_as_saved = found.saved_stages > 0 && all_markers(found.saved_stages);
    steps[step] = found;
  }
  return steps;
}

// Why the steps of `steps` (or step `only`) cannot be loaded into a pipeline of `num_stages`
// stages: steps saved by another stage count say so and what to do; the others are incomplete.
std::string why_not_loadable(const std::map<int64_t, StepFolder>& steps, int num_stages,
                             std::optional<int64_t> only = std::nullopt) {
  std::map<int, std::vector<int64_t>> other_counts;  // stage count -> its complete steps
  std::string incomplete;
  for (const auto& [step, folder] : steps) {
    if (only && step != *only) continue;
    if (folder.saved_stages > 0 && folder.saved_stages != num_stages && folder.complete_as_saved)
      other_counts[folder.saved_stages].push_back(step);
    else if (!folder.complete)
      incomplete += (incomplete.empty() ? "" : ", ") + std::to_string(step);
  }
  std::string out;
  for (const auto& [count, list] : other_counts) {
    std::string numbers;
    for (int64_t step : list) numbers += (numbers.empty() ? "" : ", ") + std::to_string(step);
    out += (out.empty() ? "" : "; ") + std::string(list.size() == 1 ? "step " : "steps ") +
           numbers + (list.size() == 1 ? " was" : " were") + " saved by " + std::to_string(count) +
           " stages; this pipeline has " + std::to_string(num_stages) +
           ": build the pipeline with the " + std::to_string(count) +
           " stages it was saved with (the same split) to resume, or give this pipeline another "
           "checkpoint folder to start afresh";
  }
  if (!incomplete.empty())
    out += (out.empty() ? "" : "; ") +
           std::string(
               "incomplete (some stage's marker is missing: a rank stopped while "
               "saving): step") +
           (incomplete.find(',') == std::string::npos ? " " : "s ") + incomplete;
  return out;
}

// `message` of Module::load_state_dict without its hint about a `strict` flag, which
// load_checkpoint does not have.
std::string without_strict_hint(std::string message) {
  const size_t hint = message.find("\n  (pass strict=false");
  if (hint != std::string::npos) message.erase(hint, message.find(')', hint) + 1 - hint);
  return message;
}

int stage_count(const std::vector<std::shared_ptr<PipelineStage>>& stages) {
  if (stages.empty()) throw CheckpointError("checkpoint: no stages given");
  for (const auto& stage : stages)
    if (!stage) throw CheckpointError("checkpoint: a null stage was given");
  return stages.front()->num_stages();
}

// The stage's file contents: its tensors in the tensorplay/core/serialize.h format.
StateDict stage_tensors(const PipelineStage& stage, const optim::Optimizer& optimizer,
                        const std::unordered_map<const TensorImpl*, size_t>& index,
                        const StateDict& optimizer_state, int64_t step,
                        const std::vector<std::pair<std::string, std::string>>& rng_states) {
  StateDict dict;
  dict.insert("checkpoint.step", text_tensor(std::to_string(step)));
  dict.insert("checkpoint.stage_index", scalar_tensor(static_cast<float>(stage.stage_index())));
  dict.insert("checkpoint.num_stages", scalar_tensor(static_cast<float>(stage.num_stages())));
  dict.insert("checkpoint.optimizer", text_tensor(optimizer.type_name()));
  for (const auto& [name, tensor] : stage.module().state_dict())
    dict.insert("model." + name, tensor);
  for (const auto& [key, tensor] : optimizer_state)
    if (key.rfind("options.", 0) == 0) dict.insert("optimizer." + key, tensor);
  for (const auto& [name, parameter] : stage.module().named_parameters()) {
    auto it = index.find(parameter.impl_ptr().get());
    if (it == index.end()) continue;  // frozen: not in the optimizer
    const std::string prefix = "state." + std::to_string(it->second) + ".";
    for (const auto& [key, tensor] : optimizer_state)
      if (key.rfind(prefix, 0) == 0)
        dict.insert("optimizer.state." + name + "." + key.substr(prefix.size()), tensor);
  }
  for (const auto& [name, state] : rng_states) dict.insert("rng." + name, text_tensor(state));
  return dict;
}

// Reads and checks one stage's file against its marker.
StateDict read_stage_file(const std::string& folder, const PipelineStage& stage) {
  const std::string path = stage_file(folder, stage.stage_index());
  const Marker marker = read_marker(marker_file(folder, stage.stage_index()));
  const std::string bytes = read_whole(path);
  if (bytes.size() != marker.bytes)
    throw CheckpointError("checkpoint file '" + path + "' is truncated or damaged: " +
                          std::to_string(bytes.size()) + " bytes, its marker says " +
                          std::to_string(marker.bytes) + " (pass an earlier step to resume)");
  if (fnv1a64(bytes) != marker.checksum)
    throw CheckpointError("checkpoint file '" + path +
                          "' is corrupted: its checksum differs from its marker's (pass an "
                          "earlier step to resume)");
  std::istringstream in(bytes);
  StateDict dict;
  try {
    dict = read_tensors(in, path);
  } catch (const std::exception& e) {
    throw CheckpointError(std::string("checkpoint file '") + path +
                          "' does not parse: " + e.what());
  }
  for (const char* key : {"checkpoint.step", "checkpoint.stage_index", "checkpoint.num_stages"})
    if (!dict.contains(key))
      throw CheckpointError("checkpoint file '" + path + "' has no '" + key +
                            "': it was not written by save_checkpoint");
  const int saved_stage = static_cast<int>(dict.at("checkpoint.stage_index").item());
  const int saved_count = static_cast<int>(dict.at("checkpoint.num_stages").item());
  if (saved_stage != stage.stage_index() || saved_count != stage.num_stages())
    throw CheckpointError("checkpoint file '" + path + "' holds stage " +
                          std::to_string(saved_stage) + " of " + std::to_string(saved_count) +
                          ", but stage " + std::to_string(stage.stage_index()) + " of " +
                          std::to_string(stage.num_stages()) +
                          " was asked for: resume with the split it was saved with");
  return dict;
}

// The step load_checkpoint reads: `step` when given (it must be complete), else the newest
// complete one.
int64_t step_to_load(const std::string& dir, const std::map<int64_t, StepFolder>& steps,
                     int num_stages, std::optional<int64_t> step) {
  if (step) {
    auto it = steps.find(*step);
    if (it == steps.end())
      throw CheckpointError("checkpoint: no step " + std::to_string(*step) + " under '" + dir +
                            "'");
    if (!it->second.complete) {
      const std::string why = why_not_loadable(steps, num_stages, *step);
      throw CheckpointError("checkpoint: step " + std::to_string(*step) + " under '" + dir +
                            "' cannot be loaded: " + why +
                            (why.rfind("incomplete", 0) == 0 ? "; pass another step" : ""));
    }
    return *step;
  }
  for (auto it = steps.rbegin(); it != steps.rend(); ++it)
    if (it->second.complete) return it->first;
  throw CheckpointError("checkpoint: no complete checkpoint of " + std::to_string(num_stages) +
                        " stages under '" + dir + "'" +
                        (steps.empty() ? std::string(" (no step folders)")
                                       : ": " + why_not_loadable(steps, num_stages)));
}

// The stage files' entries sorted for loading: each stage's model state, and the optimizer's
// state with its parameters numbered as `optimizer` numbers them.
struct LoadedState {
  std::vector<StateDict> models;  // per stage
  StateDict optimizer;
};

LoadedState sort_entries(const std::string& folder,
                         const std::vector<std::shared_ptr<PipelineStage>>& stages,
                         const std::vector<StateDict>& files, optim::Optimizer& optimizer) {
  const auto index = parameter_indices(optimizer);
  LoadedState out;
  out.models.resize(stages.size());
  for (size_t k = 0; k < stages.size(); ++k) {
    std::map<std::string, size_t> by_name;
    for (const auto& [name, parameter] : stages[k]->module().named_parameters()) {
      auto it = index.find(parameter.impl_ptr().get());
      if (it != index.end()) by_name[name] = it->second;
    }
    for (const auto& [key, tensor] : files[k]) {
      if (key.rfind("model.", 0) == 0) {
        out.models[k].insert(key.substr(6), tensor);
      } else if (key.rfind("optimizer.options.", 0) == 0) {
        out.optimizer.insert_or_assign(key.substr(10), tensor);
      } else if (key.rfind("optimizer.state.", 0) == 0) {
        const std::string rest = key.substr(16);
        const size_t dot = rest.rfind('.');
        auto it = dot == std::string::npos ? by_name.end() : by_name.find(rest.substr(0, dot));
        if (it == by_name.end())
          throw CheckpointError("checkpoint file '" + stage_file(folder, stages[k]->stage_index()) +
                                "' has optimizer state for '" + rest +
                                "', which is no parameter of the optimizer in this stage: build "
                                "the optimizer over the same parameters as when saving");
        out.optimizer.insert("state." + std::to_string(it->second) + "." + rest.substr(dot + 1),
                             tensor);
      }
    }
  }
  return out;
}

// The saved state of every generator `options` names, from the first stage's file (`path`).
std::vector<std::string> saved_generator_states(const StateDict& file, const std::string& path,
                                                const CheckpointOptions& options) {
  std::vector<std::string> states;
  for (const auto& [name, generator] : all_generators(options)) {
    const Tensor* state = file.find("rng." + name);
    if (state == nullptr)
      throw CheckpointError("checkpoint file '" + path + "' has no state for generator '" + name +
                            "': pass the generators it was saved with");
    states.push_back(tensor_text(*state));
  }
  return states;
}

}  // namespace

void save_checkpoint(const std::string& dir,
                     const std::vector<std::shared_ptr<PipelineStage>>& stages,
                     const optim::Optimizer& optimizer, int64_t step,
                     const CheckpointOptions& options) {
  const int num_stages = stage_count(stages);
  if (step < 0) throw CheckpointError("checkpoint: step " + std::to_string(step) + " is negative");
  const auto index = parameter_indices(optimizer);
  // Every optimizer parameter must be saved with some stage, or its state would be lost.
  std::vector<bool> covered(optimizer.parameters().size(), false);
  for (const auto& stage : stages)
    for (const auto& [name, parameter] : stage->module().named_parameters()) {
      auto it = index.find(parameter.impl_ptr().get());
      if (it != index.end()) covered[it->second] = true;
    }
  for (size_t i = 0; i < covered.size(); ++i)
    if (!covered[i])
      throw CheckpointError("checkpoint: optimizer parameter " + std::to_string(i) +
                            " belongs to none of the stages given; pass every stage the "
                            "optimizer updates");

  std::vector<std::pair<std::string, std::string>> rng_states;
  for (const auto& [name, generator] : all_generators(options))
    rng_states.emplace_back(name, generator_state(*generator));

  // A stage replicated over a mesh's "dp" dimension is written once, by its first replica (the
  // replicas hold the same values after every averaged step).
  auto writes = [](const PipelineStage& stage) {
    const distributed::DeviceMesh& mesh = stage.get_mesh();
    return !mesh.has_dim("dp") || mesh.get_local_rank("dp") == 0;
  };
  if (std::none_of(stages.begin(), stages.end(), [&](const auto& s) { return writes(*s); })) return;
  remove_dead_writers_files(dir);
  const std::string folder = step_folder(dir, step);
  std::error_code ec;
  fs::create_directories(folder, ec);
  if (ec) throw CheckpointError("checkpoint: cannot create '" + folder + "': " + ec.message());
  fsync_folder(fs::path(folder).parent_path().string());

  const StateDict optimizer_state = optimizer.state_dict();
  for (const auto& stage : stages) {
    if (!writes(*stage)) continue;
    std::ostringstream out;
    write_tensors(out, stage_tensors(*stage, optimizer, index, optimizer_state, step, rng_states));
    const std::string bytes = out.str();
    write_atomically(stage_file(folder, stage->stage_index()), bytes);
    write_atomically(marker_file(folder, stage->stage_index()),
                     marker_text(stage->stage_index(), num_stages, step, bytes));
  }
}

int64_t load_checkpoint(const std::string& dir,
                        const std::vector<std::shared_ptr<PipelineStage>>& stages,
                        optim::Optimizer& optimizer, std::optional<int64_t> step,
                        const CheckpointOptions& options) {
  const int num_stages = stage_count(stages);
  remove_dead_writers_files(dir);
  const int64_t chosen = step_to_load(dir, scan_steps(dir, num_stages), num_stages, step);
  const std::string folder = step_folder(dir, chosen);
  const std::string first_file = stage_file(folder, stages.front()->stage_index());

  // Read and check every file before changing anything.
  std::vector<StateDict> files;
  for (const auto& stage : stages) files.push_back(read_stage_file(folder, *stage));
  const LoadedState state = sort_entries(folder, stages, files, optimizer);
  const std::vector<std::string> rng_states =
      saved_generator_states(files.front(), first_file, options);

  try {
    for (size_t k = 0; k < stages.size(); ++k) stages[k]->module().load_state_dict(state.models[k]);
    optimizer.load_state_dict(state.optimizer);
  } catch (const std::invalid_argument& e) {
    throw CheckpointError("checkpoint '" + folder +
                          "' does not fit these stages: " + without_strict_hint(e.what()) +
                          "\n  (build the stages as when saving: the same model, split and "
                          "parameters)");
  }
  auto generators = all_generators(options);
  for (size_t g = 0; g < generators.size(); ++g)
    restore_generator(*generators[g].second, rng_states[g], first_file, generators[g].first);
  return chosen;
}

std::vector<int64_t> complete_checkpoint_steps(const std::string& dir, int num_stages) {
  std::vector<int64_t> complete;
  for (const auto& [step, folder] : scan_steps(dir, num_stages))
    if (folder.complete) complete.push_back(step);
  return complete;
}

std::optional<int64_t> latest_checkpoint_step(const std::string& dir, int num_stages) {
  auto steps = complete_checkpoint_steps(dir, num_stages);
  if (steps.empty()) return std::nullopt;
  return steps.back();
}

}  // namespace tensorplay::pipelining
