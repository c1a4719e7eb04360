// Layout-free checkpoints, the saving side and finding steps: each writer's tensors by name in a
// data file, then its index; a step is complete when its indexes cover every stage.
#include "tensorplay/pipelining/checkpoints/named_checkpoint.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>
#include <unordered_map>

#include "tensorplay/pipelining/checkpoints/checkpoint_error.h"
#include "tensorplay/pipelining/checkpoints/checkpoint_io.h"
#include "tensorplay/pipelining/checkpoints/named_checkpoint_steps.h"

namespace tensorplay::pipelining {
namespace {

namespace fs = std::filesystem;
using namespace checkpoint_io;

constexpr uint64_t kAlign = 64;

// The tensors one writer saves, laid out in its data file.
class DataWriter {
 public:
  void add(EntryKind kind, const std::string& name, const std::string& key, const Tensor& t) {
    Tensor host = t.detach().cpu();
    IndexEntry e;
    e.kind = kind;
    e.name = name;
    e.key = key;
    e.dtype = dtype_word(host.dtype());
    e.shape = host.shape();
    place(e, host.raw_data(), host.nbytes());
    hosts_.push_back(std::move(host));
  }
  void add_bytes(EntryKind kind, const std::string& name, std::string bytes) {
    texts_.push_back(std::make_unique<std::string>(std::move(bytes)));
    const std::string& kept = *texts_.back();
    IndexEntry e;
    e.kind = kind;
    e.name = name;
    e.dtype = kByteDType;
    e.shape = {static_cast<int64_t>(kept.size())};
    place(e, kept.data(), kept.size());
  }
  const std::vector<IndexEntry>& entries() const { return entries_; }
  const std::vector<std::pair<const void*, size_t>>& parts() const { return parts_; }
  uint64_t size() const { return offset_; }

 private:
  void place(IndexEntry& e, const void* data, size_t bytes) {
    const uint64_t pad = (kAlign - offset_ % kAlign) % kAlign;
    if (pad > 0) parts_.emplace_back(kZeros, static_cast<size_t>(pad));
    offset_ += pad;
    e.offset = offset_;
    e.bytes = bytes;
    e.checksum = word_checksum(data, bytes);
    if (bytes > 0) parts_.emplace_back(data, bytes);
    offset_ += bytes;
    entries_.push_back(std::move(e));
  }
  static constexpr char kZeros[kAlign] = {};
  uint64_t offset_ = 0;
  std::vector<Tensor> hosts_;
  std::vector<std::unique_ptr<std::string>> texts_;
  std::vector<std::pair<const void*, size_t>> parts_;
  std::vector<IndexEntry> entries_;
};

bool writes(const PipelineStage& stage) {
  const distributed::DeviceMesh& mesh = stage.get_mesh();
  return !mesh.has_dim("dp") || mesh.get_local_rank("dp") == 0;
}

// Whether `stage` is the one that saves `name`: a tied parameter is saved by the lowest stage
// holding a copy, everything else by its only holder.
bool owns(const PipelineStage& stage, const std::string& name) {
  auto it = stage.tied_parameters().find(name);
  if (it == stage.tied_parameters().end() || it->second.empty()) return true;
  return *std::min_element(it->second.begin(), it->second.end()) == stage.stage_index();
}

// Parameter index in the optimizer -> the name its writer saves it under.
std::map<size_t, std::string> optimizer_names(const std::vector<const PipelineStage*>& writers,
                                              const optim::Optimizer& optimizer) {
  std::unordered_map<const TensorImpl*, size_t> index;
  for (size_t i = 0; i < optimizer.parameters().size(); ++i)
    index[optimizer.parameters()[i].impl_ptr().get()] = i;
  std::map<size_t, std::string> names;
  std::set<std::string> taken;
  for (const PipelineStage* stage : writers)
    for (const auto& [name, parameter] : stage->module().named_parameters()) {
      auto it = index.find(parameter.impl_ptr().get());
      if (it != index.end() && owns(*stage, name) && taken.insert(name).second)
        names[it->second] = name;
    }
  return names;
}

void check_coverage(const std::vector<std::shared_ptr<PipelineStage>>& stages,
                    const optim::Optimizer& optimizer) {
  std::set<const TensorImpl*> held;
  for (const auto& stage : stages)
    for (const auto& [name, parameter] : stage->module().named_parameters())
      held.insert(parameter.impl_ptr().get());
  for (size_t i = 0; i < optimizer.parameters().size(); ++i)
    if (!held.count(optimizer.parameters()[i].impl_ptr().get()))
      throw CheckpointError("checkpoint: optimizer parameter " + std::to_string(i) +
                            " belongs to none of the stages given; pass every stage the "
                            "optimizer updates");
}

void add_optimizer(DataWriter& data, const std::vector<const PipelineStage*>& writers,
                   const optim::Optimizer& optimizer) {
  const auto names = optimizer_names(writers, optimizer);
  for (const auto& [key, tensor] : optimizer.state_dict()) {
    if (key.rfind("options.", 0) == 0) {
      data.add(EntryKind::Option, key.substr(8), "", tensor);
      continue;
    }
    // "state.<i>.<name>"
    const size_t dot = key.find('.', 6);
    if (key.rfind("state.", 0) != 0 || dot == std::string::npos) continue;
    auto it = names.find(std::stoul(key.substr(6, dot - 6)));
    if (it != names.end()) data.add(EntryKind::Optimizer, it->second, key.substr(dot + 1), tensor);
  }
}

}  // namespace

void save_named_checkpoint(const std::string& dir,
                           const std::vector<std::shared_ptr<PipelineStage>>& stages,
                           const optim::Optimizer& optimizer, int64_t step,
                           const NamedCheckpointOptions& options) {
  const int num_stages = checked_stage_count(stages);
  if (step < 0) throw CheckpointError("checkpoint: step " + std::to_string(step) + " is negative");
  check_coverage(stages, optimizer);
  std::vector<const PipelineStage*> writers;
  for (const auto& stage : stages)
    if (writes(*stage)) writers.push_back(stage.get());
  if (writers.empty()) return;
  std::sort(writers.begin(), writers.end(),
            [](auto* a, auto* b) { return a->stage_index() < b->stage_index(); });

  DataWriter data;
  std::set<std::string> saved;
  for (const PipelineStage* stage : writers)
    for (const auto& [name, tensor] : stage->module().state_dict())
      if (owns(*stage, name) && saved.insert(name).second)
        data.add(EntryKind::Model, name, "", tensor);
  add_optimizer(data, writers, optimizer);
  for (const auto& [name, generator] : checked_generators(options.generators))
    data.add_bytes(EntryKind::Generator, name, generator_state(*generator));

  CheckpointIndex index;
  index.step = step;
  index.samples_consumed = options.samples_consumed;
  index.num_stages = num_stages;
  index.optimizer = optimizer.type_name();
  for (const PipelineStage* stage : writers) index.stages.push_back(stage->stage_index());
  index.layout = options.layout.empty() ? std::to_string(num_stages) + " stages" : options.layout;
  const std::string tag = "s" + std::to_string(index.stages.front());
  index.data_file = "data_" + tag + ".bin";
  index.data_bytes = data.size();
  index.entries = data.entries();
  const std::string text = format_index(index);  // checks the names before anything is written

  remove_dead_writers_files(dir);
  const std::string folder = step_folder(dir, step);
  std::error_code ec;
  fs::create_directories(folder, ec);
  if (ec) throw CheckpointError("checkpoint: cannot create '" + folder + "': " + ec.message());
  fsync_folder(fs::path(folder).parent_path().string());
  write_atomically((fs::path(folder) / index.data_file).string(), data.parts());
  write_atomically((fs::path(folder) / ("index_" + tag + ".txt")).string(), text);
}

std::optional<NamedCheckpointInfo> latest_named_checkpoint(const std::string& dir, int num_stages) {
  std::optional<NamedCheckpointInfo> found;
  const auto folders = named_step_folders(dir);
  for (auto it = folders.rbegin(); it != folders.rend() && !found; ++it)
    if (const NamedStep step = read_named_step(it->second); step.complete()) found = step.info();
  const auto v2 = latest_checkpoint_step(dir, num_stages);
  if (v2 && (!found || *v2 > found->step))
    found = NamedCheckpointInfo{.step = *v2,
                                .num_stages = num_stages,
                                .layout = std::to_string(num_stages) + " stages",
                                .version = 2};
  return found;
}

}  // namespace tensorplay::pipelining
