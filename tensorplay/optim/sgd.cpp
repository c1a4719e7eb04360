// SGD update, composed from tensor ops so it runs on the parameters' device.
#include "tensorplay/optim/sgd.h"

#include <stdexcept>

#include "tensorplay/core/autograd/grad_mode.h"
#include "tensorplay/core/ops/elementwise.h"

namespace tensorplay::optim {

SGD::SGD(std::vector<Tensor> parameters, SGDOptions options)
    : Optimizer(std::move(parameters)), options_(options), momentum_buffers_(parameters_.size()) {
  if (options.lr < 0 || options.momentum < 0 || options.weight_decay < 0)
    throw std::invalid_argument("SGD: lr, momentum and weight_decay must be >= 0");
  if (options.nesterov && (options.momentum <= 0 || options.dampening != 0))
    throw std::invalid_argument("SGD: nesterov needs momentum > 0 and dampening 0");
}

void SGD::step() {
  NoGradGuard no_grad;
  for (size_t i = 0; i < parameters_.size(); ++i) {
    Tensor& p = parameters_[i];
    Tensor g = p.grad();
    if (!g.defined()) continue;
    if (options_.weight_decay != 0.0f) g = g + p.detach() * options_.weight_decay;
    if (options_.momentum != 0.0f) {
      Tensor& buf = momentum_buffers_[i];
      if (buf.defined() && buf.dtype() != p.dtype()) buf = buf.to(p.dtype());  // module converted
      if (!buf.defined()) {
        buf = g.clone();
      } else {
        Tensor scaled = options_.dampening == 0.0f ? g : g * (1.0f - options_.dampening);
        buf.copy_(buf * options_.momentum + scaled);
      }
      g = options_.nesterov ? g + buf * options_.momentum : buf;
    }
    p.copy_(p.detach() - g * options_.lr);
  }
}

StateDict SGD::state_dict() const {
  StateDict out;
  out.insert("options.lr", scalar_tensor(options_.lr));
  out.insert("options.momentum", scalar_tensor(options_.momentum));
  out.insert("options.dampening", scalar_tensor(options_.dampening));
  out.insert("options.weight_decay", scalar_tensor(options_.weight_decay));
  out.insert("options.nesterov", scalar_tensor(options_.nesterov ? 1.0f : 0.0f));
  for (size_t i = 0; i < momentum_buffers_.size(); ++i)
    if (momentum_buffers_[i].defined())
      out.insert("state." + std::to_string(i) + ".momentum_buffer", momentum_buffers_[i].detach());
  return out;
}

void SGD::load_state_dict(const StateDict& dict) {
  SGDOptions options = options_;
  std::vector<Tensor> buffers(parameters_.size());
  for (const auto& [key, tensor] : dict) {
    size_t index;
    std::string name;
    if (parse_state_key(key, index, name)) {
      if (name != "momentum_buffer") throw_unknown_key(key);
      buffers[index] = state_like_parameter(key, tensor, index);
    } else if (key == "options.lr") {
      options.lr = option_value(dict, key);
    } else if (key == "options.momentum") {
      options.momentum = option_value(dict, key);
    } else if (key == "options.dampening") {
      options.dampening = option_value(dict, key);
    } else if (key == "options.weight_decay") {
      options.weight_decay = option_value(dict, key);
    } else if (key == "options.nesterov") {
      options.nesterov = option_value(dict, key) != 0.0f;
    } else {
      throw_unknown_key(key);
    }
  }
  options_ = options;
  momentum_buffers_ = std::move(buffers);
}

}  // namespace tensorplay::optim
