// Layout-free checkpoints, the loading side: choose a step, map every tensor the local stages,
// optimizer and generators need to its entry by name, read and check them all, then apply.
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <tuple>
#include <unordered_map>

#include "tensorplay/core/autograd/grad_mode.h"
#include "tensorplay/pipelining/checkpoints/checkpoint_error.h"
#include "tensorplay/pipelining/checkpoints/checkpoint_io.h"
#include "tensorplay/pipelining/checkpoints/named_checkpoint.h"
#include "tensorplay/pipelining/checkpoints/named_checkpoint_share.h"
#include "tensorplay/pipelining/checkpoints/named_checkpoint_steps.h"
#include "tensorplay/pipelining/checkpoints/named_step_reader.h"
#include "tensorplay/pipelining/stage_module.h"

namespace tensorplay::pipelining {
namespace {

using Located = StepReader::Located;
using Stages = std::vector<std::shared_ptr<PipelineStage>>;
/// Where a tensor the load needs comes from: read here, or (sharing) gathered from a replica.
using TensorSource = std::function<Tensor(const Located&)>;

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
std::vector<StateDict> read_models(const StepReader& reader, const NamedStep& step,
                                   const Stages& stages, const TensorSource& source) {
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
      if (it == read.end()) it = read.emplace(name, source(*at)).first;
      models[k].insert(name, it->second);
    }
  }
  return models;
}

// The optimizer's state_dict ("state.<i>.<key>", "options.<x>") from the entries by name.
StateDict read_optimizer(const StepReader& reader, const NamedStep& step, const Stages& stages,
                         const optim::Optimizer& optimizer, const TensorSource& source) {
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
      dict.insert("state." + std::to_string(i) + "." + at->entry->key, source(*at));
    }
  }
  for (const auto* at : reader.of_kind(EntryKind::Option))
    dict.insert("options." + at->entry->name, source(*at));
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

// The stages' and the optimizer's state dicts, each tensor taken from `source`.
struct Parts {
  std::vector<StateDict> models;
  StateDict optimizer;
};

Parts read_parts(const StepReader& reader, const NamedStep& step, const Stages& stages,
                 const optim::Optimizer& optimizer, const TensorSource& source) {
  Parts parts;
  parts.models = read_models(reader, step, stages, source);
  parts.optimizer = read_optimizer(reader, step, stages, optimizer, source);
  return parts;
}

// Whether `own`, a stage's tensor, can take `loaded`'s storage instead of a copy of it: both
// alone on their storages (no view of either, no other holder of `loaded`'s, such as a tied copy
// in another stage that took it already), the same dtype and device.
bool can_take(const Tensor& own, const Tensor& loaded, std::set<const Storage*>& taken) {
  const TensorImpl& o = own.impl();
  const TensorImpl& l = loaded.impl();
  if (o.dtype != l.dtype || own.device() != loaded.device() || o.offset != 0 || l.offset != 0 ||
      o.storage.use_count() != 1 || l.storage.use_count() != 1 || l.requires_grad || l.grad_fn)
    return false;
  return taken.insert(l.storage.get()).second;
}

// Loads `dict` (the module's own names, shapes checked by read_models) into `module`: a stage
// tensor takes its loaded tensor's storage where can_take (its TensorImpl, which the optimizer
// and tied modules hold, stays; the storage is charged as the old one was), else copies it.
void load_model(nn::Module& module, const StateDict& dict, std::set<const Storage*>& taken) {
  NoGradGuard no_grad;
  // The module's own tensors, not state_dict()'s detached views of them.
  auto tensors = module.named_parameters();
  for (auto& buffer : module.named_buffers()) tensors.push_back(std::move(buffer));
  for (auto& [name, own] : tensors) {
    const Tensor* found = dict.find(name);
    if (found == nullptr) continue;  // a buffer not saved (not persistent)
    const Tensor& loaded = *found;
    if (!can_take(own, loaded, taken)) {
      own.copy_(loaded);
      continue;
    }
    TensorImpl& o = own.impl();
    const std::shared_ptr<Storage>& old = o.storage;
    loaded.impl().storage->recharge(old->memory_account(), old->memory_kind());
    o.storage = loaded.impl().storage;
  }
}

void apply(const NamedStep& step, const Stages& stages, optim::Optimizer& optimizer, Parts& parts,
           const std::vector<std::pair<std::string, Generator*>>& generators,
           const std::vector<std::string>& states) {
  try {
    optimizer.take_state_dict(std::move(parts.optimizer));
    std::set<const Storage*> taken;
    for (size_t k = 0; k < stages.size(); ++k)
      load_model(stages[k]->module(), parts.models[k], taken);
  } catch (const std::invalid_argument& e) {
    throw CheckpointError("checkpoint '" + step.folder +
                          "' does not fit these stages: " + e.what());
  }
  for (size_t g = 0; g < generators.size(); ++g)
    checkpoint_io::restore_generator_state(*generators[g].second, states[g]);
}

NamedCheckpointInfo load_step(const NamedStep& step, const Stages& stages,
                              optim::Optimizer& optimizer, const NamedCheckpointOptions& options) {
  StepReader reader(step);
  const auto generators = checked_generators(options.generators);
  check_no_foreign_tensors(reader, step, stages);
  Parts parts = read_parts(reader, step, stages, optimizer,
                           [&reader](const Located& at) { return reader.read(at); });
  const std::vector<std::string> states = read_generators(reader, step, generators);
  apply(step, stages, optimizer, parts, generators, states);
  NamedCheckpointInfo info = step.info();
  info.bytes_read = reader.bytes_read();
  return info;
}

// load_step with the reading split among options.replicas: each replica checks everything as
// load_step does, reads its share of the model and optimizer tensors (the generators and the
// optimizer's options, a few bytes, whole), learns that every replica did so without error, then
// the replicas exchange their shares; only then does anything change.
NamedCheckpointInfo load_step_shared(const NamedStep& step, const Stages& stages,
                                     optim::Optimizer& optimizer,
                                     const NamedCheckpointOptions& options) {
  ReplicaExchange& replicas = *options.replicas;
  StepReader reader(step);
  std::vector<std::pair<std::string, Generator*>> generators;
  std::vector<const Located*> wanted;
  std::vector<int> owner;
  std::vector<Tensor> mine;
  std::vector<std::string> states;
  std::unordered_map<const IndexEntry*, Tensor> whole;  // the optimizer's options
  std::string error;
  try {
    generators = checked_generators(options.generators);
    check_no_foreign_tensors(reader, step, stages);
    std::set<const IndexEntry*> seen;
    read_parts(reader, step, stages, optimizer, [&](const Located& at) {
      if (at.entry->kind == EntryKind::Option)  // a few bytes: read whole, here and now
        whole.emplace(at.entry, reader.read(at));
      else if (seen.insert(at.entry).second)
        wanted.push_back(&at);
      return Tensor();
    });
    states = read_generators(reader, step, generators);
    owner = deal_by_bytes(wanted, replicas.size());
    mine = read_share(reader, wanted, owner, replicas.rank());
  } catch (const std::exception& e) {
    error = e.what();
  }
  agree_among_replicas(replicas, error,
                       "step " + std::to_string(step.info().step) + ", " + entries_digest(wanted),
                       "what they load");
  const auto shared = gather_shares(replicas, wanted, owner, std::move(mine));
  Parts parts = read_parts(reader, step, stages, optimizer, [&](const Located& at) {
    auto it = whole.find(at.entry);
    return it != whole.end() ? it->second : shared.at(at.entry);
  });
  apply(step, stages, optimizer, parts, generators, states);
  NamedCheckpointInfo info = step.info();
  info.bytes_read = reader.bytes_read();
  return info;
}

NamedCheckpointInfo load_version_2(const std::string& dir, const Stages& stages,
                                   optim::Optimizer& optimizer, std::optional<int64_t> step,
                                   const NamedCheckpointOptions& options) {
  const int n = stages.front()->num_stages();
  const int64_t loaded =
      load_checkpoint(dir, stages, optimizer, step, {.generators = options.generators});
  return {.step = loaded, .num_stages = n, .layout = std::to_string(n) + " stages", .version = 2};
}

// What load_named_checkpoint loads: a layout-free step, or else a version-2 one (its step, or
// none: the newest).
struct Choice {
  std::optional<NamedStep> named;
  std::optional<int64_t> version_2;
  std::string text() const {
    if (named) return "layout-free step " + std::to_string(named->info().step);
    return version_2 ? "version-2 step " + std::to_string(*version_2) : "the newest version-2 step";
  }
};

Choice choose_given(const std::string& dir, const std::map<int64_t, std::string>& folders,
                    int64_t step) {
  auto it = folders.find(step);
  if (it == folders.end()) return {.named = std::nullopt, .version_2 = step};
  NamedStep found = read_named_step(it->second);
  if (!found.complete())
    throw CheckpointError("checkpoint: step " + std::to_string(step) + " under '" + dir +
                          "' cannot be loaded: " + found.why_incomplete() + "; pass another step");
  return {.named = std::move(found), .version_2 = std::nullopt};
}

Choice choose(const std::string& dir, int num_stages, std::optional<int64_t> step) {
  const auto folders = named_step_folders(dir);
  if (step) return choose_given(dir, folders, *step);
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
    return {.named = std::nullopt, .version_2 = *v2};
  if (chosen) return {.named = std::move(chosen), .version_2 = std::nullopt};
  if (folders.empty()) return {};
  throw CheckpointError("checkpoint: no complete checkpoint under '" + dir + "'" + skipped);
}

bool shares(const NamedCheckpointOptions& options) {
  return options.replicas && options.replicas->size() > 1;
}

NamedCheckpointInfo load_choice(const std::string& dir, const Choice& choice, const Stages& stages,
                                optim::Optimizer& optimizer,
                                const NamedCheckpointOptions& options) {
  if (!choice.named) return load_version_2(dir, stages, optimizer, choice.version_2, options);
  if (shares(options)) return load_step_shared(*choice.named, stages, optimizer, options);
  return load_step(*choice.named, stages, optimizer, options);
}

}  // namespace

NamedCheckpointInfo load_named_checkpoint(const std::string& dir, const Stages& stages,
                                          optim::Optimizer& optimizer, std::optional<int64_t> step,
                                          const NamedCheckpointOptions& options) {
  if (!shares(options)) {
    const int num_stages = checked_stage_count(stages);
    checkpoint_io::remove_dead_writers_files(dir);
    return load_choice(dir, choose(dir, num_stages, step), stages, optimizer, options);
  }
  // Replicas agree on the step (or all fail alike) before any of them reads a tensor.
  std::optional<Choice> choice;
  std::string error;
  try {
    const int num_stages = checked_stage_count(stages);
    checkpoint_io::remove_dead_writers_files(dir);
    choice = choose(dir, num_stages, step);
  } catch (const std::exception& e) {
    error = e.what();
  }
  agree_among_replicas(*options.replicas, error, choice ? choice->text() : "",
                       "the step they load");
  return load_choice(dir, *choice, stages, optimizer, options);
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
