// Summing tied-parameter gradients over the local copies.
#include "stages/tied_parameters.h"

#include <stdexcept>
#include <string>
#include <utility>

#include "tensors/autograd/grad_mode.h"
#include "tensors/ops/elementwise.h"

namespace tensorplay::pipelining {

namespace {

using LocalStage = std::pair<int, nn::Module*>;

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
    Tensor sum;
    for (const Tensor& p : copies) {
      Tensor g = p.grad();
      if (!g.defined()) continue;
      sum = sum.defined() ? add(sum, g.to(sum.device())) : g.to(g.device()).clone();
    }
    if (!sum.defined()) continue;  // no copy took part in this step
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

void sync_tied_gradients(const Pipe& pipe) {
  std::vector<LocalStage> local;
  for (int s = 0; s < pipe.num_stages(); ++s) local.emplace_back(s, &pipe.stage_module(s));
  sync(local, pipe, false);
}

}  // namespace tensorplay::pipelining
