// AdamW update: one fused loop per float32 parameter on the host, tensor ops on other devices and
// dtypes.
#include "tensorplay/optim/adamw.h"

#include <cmath>
#include <stdexcept>

#include "tensorplay/core/autograd/grad_mode.h"
#include "tensorplay/core/ops/activation.h"
#include "tensorplay/core/ops/elementwise.h"
#include "tensorplay/cpu_kernels/optimizer_kernels.h"

namespace tensorplay::optim {

AdamW::AdamW(std::vector<Tensor> parameters, AdamWOptions options)
    : Optimizer(std::move(parameters)),
      options_(options),
      steps_(parameters_.size(), 0),
      exp_avg_(parameters_.size()),
      exp_avg_sq_(parameters_.size()) {
  if (!(options.lr >= 0) || !(options.eps >= 0) || !(options.weight_decay >= 0))
    throw std::invalid_argument("AdamW: lr, eps and weight_decay must be >= 0");
  if (!(options.beta1 >= 0 && options.beta1 < 1) || !(options.beta2 >= 0 && options.beta2 < 1))
    throw std::invalid_argument(
        "AdamW: betas must be in [0, 1), got beta1=" + std::to_string(options.beta1) +
        ", beta2=" + std::to_string(options.beta2));
}

void AdamW::step() {
  NoGradGuard no_grad;
  for (size_t i = 0; i < parameters_.size(); ++i) {
    Tensor g = parameters_[i].grad();
    if (!g.defined()) continue;
    if (!exp_avg_[i].defined()) {
      exp_avg_[i] = zeros_like(parameters_[i]);
      exp_avg_sq_[i] = zeros_like(parameters_[i]);
    } else if (exp_avg_[i].dtype() != parameters_[i].dtype()) {  // the module changed dtype
      exp_avg_[i] = exp_avg_[i].to(parameters_[i].dtype());
      exp_avg_sq_[i] = exp_avg_sq_[i].to(parameters_[i].dtype());
    }
    ++steps_[i];
    if (parameters_[i].device().is_cpu() && parameters_[i].dtype() == DType::Float32 &&
        g.device().is_cpu())
      step_host(i, g.to(DType::Float32));
    else
      step_device(i, g);
  }
}

void AdamW::step_host(size_t i, const Tensor& grad) {
  const AdamWOptions& o = options_;
  // Scalars as PyTorch computes them: Python floats (double), narrowed to float by the kernels.
  double bias_correction1 = 1.0 - std::pow(static_cast<double>(o.beta1), steps_[i]);
  double bias_correction2 = 1.0 - std::pow(static_cast<double>(o.beta2), steps_[i]);
  cpu_kernels::AdamWScalars s;
  s.decay = static_cast<float>(1.0 - static_cast<double>(o.lr) * o.weight_decay);
  s.weight1 = static_cast<float>(1.0 - o.beta1);
  s.beta2 = o.beta2;
  s.weight2 = static_cast<float>(1.0 - o.beta2);
  s.step_size = static_cast<float>(o.lr / bias_correction1);
  s.correction2_sqrt = static_cast<float>(std::sqrt(bias_correction2));
  s.eps = o.eps;
  cpu_kernels::adamw_update(parameters_[i].data<float>(), exp_avg_[i].data<float>(),
                            exp_avg_sq_[i].data<float>(), grad.data<float>(),
                            parameters_[i].numel(), s);
}

void AdamW::step_device(size_t i, const Tensor& grad) {
  const AdamWOptions& o = options_;
  double bias_correction1 = 1.0 - std::pow(static_cast<double>(o.beta1), steps_[i]);
  double bias_correction2 = 1.0 - std::pow(static_cast<double>(o.beta2), steps_[i]);
  Tensor& p = parameters_[i];
  Tensor pd = p.detach();
  Tensor g = grad.detach();
  Tensor m = exp_avg_[i] + (g - exp_avg_[i]) * static_cast<float>(1.0 - o.beta1);
  Tensor v = exp_avg_sq_[i] * o.beta2 + square(g) * static_cast<float>(1.0 - o.beta2);
  Tensor denom = sqrt(v) / static_cast<float>(std::sqrt(bias_correction2)) + o.eps;
  Tensor decayed = pd * static_cast<float>(1.0 - static_cast<double>(o.lr) * o.weight_decay);
  p.copy_(decayed - (m / denom) * static_cast<float>(o.lr / bias_correction1));
  exp_avg_[i].copy_(m);
  exp_avg_sq_[i].copy_(v);
}

StateDict AdamW::state_dict() const {
  StateDict out;
  out.insert("options.lr", scalar_tensor(options_.lr));
  out.insert("options.beta1", scalar_tensor(options_.beta1));
  out.insert("options.beta2", scalar_tensor(options_.beta2));
  out.insert("options.eps", scalar_tensor(options_.eps));
  out.insert("options.weight_decay", scalar_tensor(options_.weight_decay));
  for (size_t i = 0; i < parameters_.size(); ++i) {
    if (!exp_avg_[i].defined()) continue;
    std::string prefix = "state." + std::to_string(i) + ".";
    out.insert(prefix + "step", scalar_tensor(static_cast<float>(steps_[i])));
    out.insert(prefix + "exp_avg", exp_avg_[i].detach());
    out.insert(prefix + "exp_avg_sq", exp_avg_sq_[i].detach());
  }
  return out;
}

void AdamW::load_state_dict(const StateDict& dict) {
  AdamWOptions options = options_;
  std::vector<int64_t> steps(parameters_.size(), 0);
  std::vector<Tensor> exp_avg(parameters_.size()), exp_avg_sq(parameters_.size());
  for (const auto& [key, tensor] : dict) {
    size_t index;
    std::string name;
    if (parse_state_key(key, index, name)) {
      if (name == "step") {
        float value = option_value(dict, key);
        if (!(value >= 0) || value != std::floor(value))
          throw std::invalid_argument("AdamW::load_state_dict: '" + key +
                                      "' must be a whole number >= 0");
        steps[index] = static_cast<int64_t>(value);
      } else if (name == "exp_avg") {
        exp_avg[index] = state_like_parameter(key, tensor, index);
      } else if (name == "exp_avg_sq") {
        exp_avg_sq[index] = state_like_parameter(key, tensor, index);
      } else {
        throw_unknown_key(key);
      }
    } else if (key == "options.lr") {
      options.lr = option_value(dict, key);
    } else if (key == "options.beta1") {
      options.beta1 = option_value(dict, key);
    } else if (key == "options.beta2") {
      options.beta2 = option_value(dict, key);
    } else if (key == "options.eps") {
      options.eps = option_value(dict, key);
    } else if (key == "options.weight_decay") {
      options.weight_decay = option_value(dict, key);
    } else {
      throw_unknown_key(key);
    }
  }
  for (size_t i = 0; i < parameters_.size(); ++i) {
    bool has_m = exp_avg[i].defined(), has_v = exp_avg_sq[i].defined();
    if (has_m != has_v || (has_m && steps[i] == 0) || (!has_m && steps[i] != 0))
      throw std::invalid_argument("AdamW::load_state_dict: parameter " + std::to_string(i) +
                                  " needs all of state." + std::to_string(i) +
                                  ".{step,exp_avg,exp_avg_sq} or none of them");
  }
  options_ = options;
  steps_ = std::move(steps);
  exp_avg_ = std::move(exp_avg);
  exp_avg_sq_ = std::move(exp_avg_sq);
}

}  // namespace tensorplay::optim
