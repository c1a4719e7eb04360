// Layout-free checkpoints, the loading side: choose a step, map every tensor the local stages,
// optimizer and generators need to its entry by name, read and check them all, then apply.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <tuple>
#include <unordered_map>

#include "stages/checkpoint_io.h"
#include "stages/named_checkpoint.h"
#include "stages/named_checkpoint_steps.h"
#include "stages/stage_module.h"

namespace tensorplay::pipelining {
namespace {

namespace fs = std::filesystem;

// One step's entries by (kind, name, key), the lowest stage's writer first when several saved
// one (optimizer options, generators), and reads from the data files.
class StepReader {
 public:
  struct Located {
    size_t index = 0;  // into step.indexes
    const IndexEntry* entry = nullptr;
  };
  explicit StepReader(const NamedStep& step) : step_(step), fds_(step.indexes.size(), -1) {
    for (size_t i = 0; i < step.indexes.size(); ++i)
      for (const IndexEntry& e : step.indexes[i].entries)
        entries_.try_emplace({e.kind, e.name, e.key}, Located{i, &e});
    for (const auto& [key, at] : entries_)
      if (std::get<0>(key) == EntryKind::Optimizer) by_parameter_[at.entry->name].push_back(&at);
  }
  ~StepReader() {
    for (int fd : fds_)
      if (fd >= 0) ::close(fd);
  }
  StepReader(const StepReader&) = delete;
  StepReader& operator=(const StepReader&) = delete;

  const Located* find(EntryKind kind, const std::string& name, const std::string& key = "") const {
    auto it = entries_.find({kind, name, key});
    return it == entries_.end() ? nullptr : &it->second;
  }
  std::vector<const Located*> of_kind(EntryKind kind) const {
    std::vector<const Located*> all;
    for (const auto& [key, at] : entries_)
      if (std::get<0>(key) == kind) all.push_back(&at);
    return all;
  }
  const std::vector<const Located*>& state_of(const std::string& parameter) const {
    static const std::vector<const Located*> none;
    auto it = by_parameter_.find(parameter);
    return it == by_parameter_.end() ? none : it->second;
  }
  bool has_optimizer_state() const { return !by_parameter_.empty(); }

  Tensor read(const Located& at) {
    const IndexEntry& e = *at.entry;
    Tensor host = empty(e.shape, {.dtype = dtype_of_word(e.dtype, where(at)), .device = cpu()});
    fill(at, host.raw_data());
    return host;
  }
  std::string read_bytes(const Located& at) {
    std::string bytes(at.entry->bytes, '\0');
    fill(at, bytes.data());
    return bytes;
  }
  std::string where(const Located& at) const {
    std::string text(1, '\'');
    text += data_path(at.index);
    text += '\'';
    return text;
  }

 private:
  std::string data_path(size_t i) const {
    return (fs::path(step_.folder) / step_.indexes[i].data_file).string();
  }
  int open_data(size_t i) {
    if (fds_[i] >= 0) return fds_[i];
    const std::string path = data_path(i);
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) checkpoint_io::throw_errno("open", path);
    fds_[i] = fd;
    struct stat st {};
    if (::fstat(fd, &st) != 0) checkpoint_io::throw_errno("inspect", path);
    if (static_cast<uint64_t>(st.st_size) != step_.indexes[i].data_bytes)
      throw CheckpointError("checkpoint data file '" + path + "' is truncated or damaged: " +
                            std::to_string(st.st_size) + " bytes, its index '" + step_.paths[i] +
                            "' says " + std::to_string(step_.indexes[i].data_bytes) +
                            " (pass an earlier step to resume)");
    return fd;
  }
  void fill(const Located& at, void* out) {
    const IndexEntry& e = *at.entry;
    const int fd = open_data(at.index);
    uint64_t done = 0;
    while (done < e.bytes) {
      const ssize_t n = ::pread(fd, static_cast<char*>(out) + done, e.bytes - done,
                                static_cast<off_t>(e.offset + done));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0)
        checkpoint_io::throw_errno("read tensor '" + e.name + "' from", data_path(at.index));
      done += static_cast<uint64_t>(n);
    }
    if (checkpoint_io::word_checksum(out, e.bytes) != e.checksum)
      throw CheckpointError("checkpoint: tensor '" + e.name + (e.key.empty() ? "" : "." + e.key) +
                            "' in " + where(at) +
                            " is corrupted: its checksum differs from its index's (pass an "
                            "earlier step to resume)");
  }

  const NamedStep& step_;
  std::map<std::tuple<EntryKind, std::string, std::string>, Located> entries_;
  std::map<std::string, std::vector<const Located*>> by_parameter_;
  std::vector<int> fds_;
};

std::string shape_text(const Shape& shape) { return tensorplay::to_string(shape); }

// Every model tensor the checkpoint holds must be one of this model's: the traced graph's
// parameters and buffers (StageModule), or, for stages built by hand when this process holds
// every stage, their state.
void check_no_foreign_tensors(const StepReader& reader, const NamedStep& step,
                              const std::vector<std::shared_ptr<PipelineStage>>& stages) {
  std::set<std::string> known;
  std::set<int> held;
  bool traced = true;
  for (const auto& stage : stages) {
    held.insert(stage->stage_index());
    for (const auto& [name, tensor] : stage->module().state_dict()) known.insert(name);
    const auto* traced_stage = dynamic_cast<const StageModule*>(&stage->module());
    if (traced_stage == nullptr) {
      traced = false;
      continue;
    }
    for (const Value& value : traced_stage->graph().values)
      if (value.kind == ValueKind::Parameter || value.kind == ValueKind::Buffer)
        known.insert(value.name);
  }
  if (!traced && static_cast<int>(held.size()) != stages.front()->num_stages()) return;
  for (const auto* at : reader.of_kind(EntryKind::Model))
    if (!known.count(at->entry->name))
      throw CheckpointError("checkpoint '" + step.folder + "' holds tensor '" + at->entry->name +
                            "' " + shape_text(at->entry->shape) +
                            ", which this model lacks: it was saved from another model (or "
                            "another size of it); load it into the model it was saved from");
}

// Each stage's state_dict, read by name. A tied weight is read once for all its copies.
std::vector<StateDict> read_models(StepReader& reader, const NamedStep& step,
                                   const std::vector<std::shared_ptr<PipelineStage>>& stages) {
  std::vector<StateDict> models(stages.size());
  std::unordered_map<std::string, Tensor> read;
  for (size_t k = 0; k < stages.size(); ++k) {
    for (const auto& [name, tensor] : stages[k]->module().state_dict()) {
      const auto* at = reader.find(EntryKind::Model, name);
      if (at == nullptr)
        throw CheckpointError("checkpoint '" + step.folder + "' has no tensor '" + name +
                              "' (held by stage " + std::to_string(stages[k]->stage_index()) +
                              " here): it was saved from another model; load it into the model "
                              "it was saved from");
      if (at->entry->shape != tensor.shape())
        throw CheckpointError("checkpoint '" + step.folder + "': tensor '" + name + "' is " +
                              shape_text(at->entry->shape) + " there and " +
                              shape_text(tensor.shape()) +
                              " in this model: it was saved from another size of the model");
      auto it = read.find(name);
      if (it == read.end()) it = read.emplace(name, reader.read(*at)).first;
      models[k].insert(name, it->second);
    }
  }
  return models;
}

// The optimizer's state_dict ("state.<i>.<key>", "options.<x>") from the entries by name.
StateDict read_optimizer(StepReader& reader, const NamedStep& step,
                         const std::vector<std::shared_ptr<PipelineStage>>& stages,
                         const optim::Optimizer& optimizer) {
  for (size_t i = 0; i < step.indexes.size(); ++i)
    if (step.indexes[i].optimizer != optimizer.type_name())
      throw CheckpointError("checkpoint index '" + step.paths[i] + "' holds the state of " +
                            step.indexes[i].optimizer + ", this optimizer is " +
                            optimizer.type_name() + ": build the optimizer it was saved with");
  std::unordered_map<const TensorImpl*, std::string> names;
  for (const auto& stage : stages)
    for (const auto& [name, parameter] : stage->module().named_parameters())
      names.try_emplace(parameter.impl_ptr().get(), name);
  StateDict dict;
  for (size_t i = 0; i < optimizer.parameters().size(); ++i) {
    const Tensor& parameter = optimizer.parameters()[i];
    auto it = names.find(parameter.impl_ptr().get());
    if (it == names.end())
      throw CheckpointError("checkpoint: optimizer parameter " + std::to_string(i) +
                            " belongs to none of the stages given; pass every stage the "
                            "optimizer updates");
    const auto& state = reader.state_of(it->second);
    if (state.empty() && reader.has_optimizer_state())
      throw CheckpointError("checkpoint '" + step.folder + "' has no optimizer state for '" +
                            it->second + "': it was saved with another optimizer or model");
    for (const auto* at : state) {
      if (!at->entry->shape.empty() && at->entry->shape != parameter.shape())
        throw CheckpointError("checkpoint '" + step.folder + "': optimizer state '" + it->second +
                              "." + at->entry->key + "' is " + shape_text(at->entry->shape) +
                              ", the parameter is " + shape_text(parameter.shape()) +
                              " in this model");
      dict.insert("state." + std::to_string(i) + "." + at->entry->key, reader.read(*at));
    }
  }
  for (const auto* at : reader.of_kind(EntryKind::Option))
    dict.insert("options." + at->entry->name, reader.read(*at));
  return dict;
}

std::vector<std::string> read_generators(
    StepReader& reader, const NamedStep& step,
    const std::vector<std::pair<std::string, Generator*>>& generators) {
  std::vector<std::string> states;
  for (const auto& [name, generator] : generators) {
    const auto* at = reader.find(EntryKind::Generator, name);
    if (at == nullptr)
      throw CheckpointError("checkpoint '" + step.folder + "' has no state for generator '" + name +
                            "': pass the generators it was saved with");
    states.push_back(reader.read_bytes(*at));
    Generator probe;
    if (!checkpoint_io::restore_generator_state(probe, states.back()))
      throw CheckpointError("checkpoint '" + step.folder + "': generator state '" + name +
                            "' does not parse (pass an earlier step)");
  }
  return states;
}

NamedCheckpointInfo load_step(const NamedStep& step,
                              const std::vector<std::shared_ptr<PipelineStage>>& stages,
                              optim::Optimizer& optimizer, const NamedCheckpointOptions& options) {
  StepReader reader(step);
  const auto generators = checked_generators(options.generators);
  check_no_foreign_tensors(reader, step, stages);
  std::vector<StateDict> models = read_models(reader, step, stages);
  StateDict optimizer_dict = read_optimizer(reader, step, stages, optimizer);
  const std::vector<std::string> states = read_generators(reader, step, generators);
  try {
    optimizer.load_state_dict(optimizer_dict);
    for (size_t k = 0; k < stages.size(); ++k) stages[k]->module().load_state_dict(models[k]);
  } catch (const std::invalid_argument& e) {
    throw CheckpointError("checkpoint '" + step.folder +
                          "' does not fit these stages: " + e.what());
  }
  for (size_t g = 0; g < generators.size(); ++g)
    checkpoint_io::restore_generator_state(*generators[g].second, states[g]);
  return step.info();
}

NamedCheckpointInfo load_version_2(const std::string& dir,
                                   const std::vector<std::shared_ptr<PipelineStage>>& stages,
                                   optim::Optimizer& optimizer, std::optional<int64_t> step,
                                   const NamedCheckpointOptions& options) {
  const int n = stages.front()->num_stages();
  const int64_t loaded =
      load_checkpoint(dir, stages, optimizer, step, {.generators = options.generators});
  return {.step = loaded, .num_stages = n, .layout = std::to_string(n) + " stages", .version = 2};
}

}  // namespace

NamedCheckpointInfo load_named_checkpoint(const std::string& dir,
                                          const std::vector<std::shared_ptr<PipelineStage>>& stages,
                                          optim::Optimizer& optimizer, std::optional<int64_t> step,
                                          const NamedCheckpointOptions& options) {
  const int num_stages = checked_stage_count(stages);
  checkpoint_io::remove_dead_writers_files(dir);
  const auto folders = named_step_folders(dir);
  if (step) {
    auto it = folders.find(*step);
    if (it == folders.end()) return load_version_2(dir, stages, optimizer, step, options);
    const NamedStep found = read_named_step(it->second);
    if (!found.complete())
      throw CheckpointError("checkpoint: step " + std::to_string(*step) + " under '" + dir +
                            "' cannot be loaded: " + found.why_incomplete() +
                            "; pass another step");
    return load_step(found, stages, optimizer, options);
  }
  // The newest step whose indexes cover every stage; only as many folders are read as needed.
  std::optional<NamedStep> chosen;
  std::string skipped;
  for (auto it = folders.rbegin(); it != folders.rend() && !chosen; ++it) {
    NamedStep found = read_named_step(it->second);
    if (!found.damaged.empty())
      throw CheckpointError("checkpoint: the newest step under '" + dir + "' (" +
                            std::to_string(it->first) + ") is damaged: " + found.damaged.front() +
                            "; pass an earlier step");
    if (found.complete())
      chosen = std::move(found);
    else
      skipped += "; step " + std::to_string(it->first) + ": " + found.why_incomplete();
  }
  const auto v2 = latest_checkpoint_step(dir, num_stages);
  if (v2 && (!chosen || *v2 > chosen->info().step))
    return load_version_2(dir, stages, optimizer, *v2, options);
  if (chosen) return load_step(*chosen, stages, optimizer, options);
  if (folders.empty()) return load_version_2(dir, stages, optimizer, std::nullopt, options);
  throw CheckpointError("checkpoint: no complete checkpoint under '" + dir + "'" + skipped);
}

StateDict read_named_model(const std::string& dir, int64_t step) {
  const auto folders = named_step_folders(dir);
  auto it = folders.find(step);
  if (it == folders.end())
    throw CheckpointError("checkpoint: no layout-free step " + std::to_string(step) + " under '" +
                          dir + "'");
  const NamedStep found = read_named_step(it->second);
  if (!found.complete())
    throw CheckpointError("checkpoint: step " + std::to_string(step) + " under '" + dir +
                          "' cannot be read: " + found.why_incomplete());
  StepReader reader(found);
  StateDict model;
  for (const auto* at : reader.of_kind(EntryKind::Model))
    model.insert(at->entry->name, reader.read(*at));
  return model;
}

}  // namespace tensorplay::pipelining
