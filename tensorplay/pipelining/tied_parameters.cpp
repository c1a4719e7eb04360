// Summing tied-parameter gradients over the local copies.
#include "tensorplay/pipelining/tied_parameters.h"

#include <set>
#include <stdexcept>
#include <string>
#include <utility>

#include "tensorplay/core/autograd/grad_mode.h"
#include "tensorplay/core/ops/elementwise.h"

namespace tensorplay::pipelining {

namespace {

using LocalStage = std::pair<int, nn::Module*>;

void write_sum(std::vector<Tensor>& copies, const Tensor& base, const std::string& name = {},
               const TiedReduce& reduce = nullptr);

void sync(const std::vector<LocalStage>& local, const Pipe& pipe, bool allow_partial) {
  NoGradGuard no_grad;
  for (const auto& [name, group] : pipe.tied_parameters()) {
    std::vector<Tensor> copies;
    std::string missing;
    for (int s : group) {
      bool found = false;
      for (const auto& [index, module] : local) {
        if (index != s) continue;
        Tensor p = module->find_tensor(name);
        if (!p.defined())
          throw std::invalid_argument("sync_tied_gradients: stage " + std::to_string(s) +
                                      " has no parameter '" + name +
                                      "'; was it built from this Pipe?");
        copies.push_back(p);
        found = true;
      }
      if (!found) missing += (missing.empty() ? "" : ", ") + std::to_string(s);
    }
    if (!missing.empty() && !allow_partial)
      throw std::invalid_argument(
          "sync_tied_gradients: tied parameter '" + name + "' also lives in stage(s) " + missing +
          ", which are not among the stages given; across processes all-reduce the gradient "
          "among the stages holding it (pass allow_partial = true to sum the local copies first)");
    write_sum(copies, Tensor());
  }
}

// Writes base + reduce(the sum of the copies' gradients) into every copy. Without `reduce`,
// nothing is written when no copy has a gradient; with it, an absent sum is zeros, so every rank
// of the reduction takes part.
void write_sum(std::vector<Tensor>& copies, const Tensor& base, const std::string& name,
               const TiedReduce& reduce) {
  // In one process the base comes first, as the unsplit model's accumulation adds it.
  Tensor sum = base.defined() && !reduce ? base.clone() : Tensor();
  for (const Tensor& p : copies) {
    Tensor g = p.grad();
    if (!g.defined()) continue;
    sum = sum.defined() ? add(sum, g.to(sum.device())) : g.clone();
  }
  if (reduce) {
    if (!sum.defined())
      sum = zeros(copies.at(0).shape(), {.dtype = copies[0].dtype(), .device = copies[0].device()});
    reduce(name, sum);
    if (base.defined()) sum = add(base, sum.to(base.device()));
  }
  if (!sum.defined()) return;  // no copy took part
  for (Tensor& p : copies) {
    Tensor g = p.grad();
    if (g.defined()) {
      g.copy_(sum);
    } else {
      Tensor fresh = empty(p.shape(), {.dtype = p.dtype(), .device = p.device()});
      fresh.copy_(sum);
      p.set_grad(fresh);
    }
  }
}

// Every local copy of each tie group named by the stages' own tie metadata.
std::map<std::string, std::vector<Tensor>> local_copies(const std::vector<PipelineStage*>& stages,
                                                        bool allow_partial) {
  std::map<std::string, std::vector<Tensor>> copies;
  std::map<std::string, std::vector<int>> groups;
  std::set<int> local;
  for (PipelineStage* s : stages) {
    if (!s) throw std::invalid_argument("tied gradients: a stage pointer is null");
    local.insert(s->stage_index());
    for (const auto& [name, group] : s->tied_parameters()) {
      groups[name] = group;
      Tensor p = s->module().find_tensor(name);
      if (!p.defined())
        throw std::invalid_argument("tied gradients: stage " + std::to_string(s->stage_index()) +
                                    " has no parameter '" + name + "'");
      copies[name].push_back(p);
    }
  }
  if (!allow_partial) {
    for (const auto& [name, group] : groups)
      for (int g : group)
        if (!local.count(g))
          throw std::invalid_argument("tied gradients: parameter '" + name +
                                      "' also lives in stage " + std::to_string(g) +
                                      ", which this process does not host; across processes the "
                                      "copies' gradients need an all-reduce");
  }
  return copies;
}

}  // namespace

void sync_tied_gradients(const std::vector<PipelineStage*>& stages, const Pipe& pipe,
                         bool allow_partial) {
  std::vector<LocalStage> local;
  for (PipelineStage* s : stages) {
    if (!s) throw std::invalid_argument("sync_tied_gradients: a stage pointer is null");
    local.emplace_back(s->stage_index(), &s->module());
  }
  sync(local, pipe, allow_partial);
}

TiedGradients begin_tied_step(const std::vector<PipelineStage*>& stages) {
  TiedGradients state;
  for (auto& [name, copies] : local_copies(stages, true)) {
    if (copies[0].grad().defined()) state.before[name] = copies[0].grad();
    for (Tensor& p : copies) p.set_grad(Tensor());
  }
  return state;
}

void finish_tied_step(const std::vector<PipelineStage*>& stages, TiedGradients&& state,
                      bool allow_partial, const TiedReduce& reduce) {
  NoGradGuard no_grad;
  for (auto& [name, copies] : local_copies(stages, allow_partial || reduce != nullptr)) {
    auto it = state.before.find(name);
    write_sum(copies, it == state.before.end() ? Tensor() : it->second, name, reduce);
  }
}

void sync_tied_gradients(const Pipe& pipe) {
  std::vector<LocalStage> local;
  for (int s = 0; s < pipe.num_stages(); ++s) local.emplace_back(s, &pipe.stage_module(s));
  sync(local, pipe, false);
}

}  // namespace tensorplay::pipelining
