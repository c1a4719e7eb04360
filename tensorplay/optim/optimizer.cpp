// Optimizer base.
#include "tensorplay/optim/optimizer.h"

#include <stdexcept>

#include "tensorplay/core/autograd/grad_mode.h"

namespace tensorplay::optim {

Optimizer::Optimizer(std::vector<Tensor> parameters) : parameters_(std::move(parameters)) {
  for (size_t i = 0; i < parameters_.size(); ++i) {
    if (!parameters_[i].defined() || !parameters_[i].is_leaf())
      throw std::invalid_argument("optimizer parameter " + std::to_string(i) +
                                  " is undefined or not a leaf tensor");
    for (size_t j = 0; j < i; ++j)
      if (parameters_[j].is_same(parameters_[i]))
        throw std::invalid_argument("optimizer parameters " + std::to_string(j) + " and " +
                                    std::to_string(i) +
                                    " are the same tensor (tied weights?): pass it once, e.g. "
                                    "from Module::parameters(), which de-duplicates");
  }
}

void Optimizer::zero_grad() {
  for (Tensor& p : parameters_) p.set_grad(Tensor());
}

bool Optimizer::parse_state_key(const std::string& key, size_t& index, std::string& name) const {
  const std::string prefix = "state.";
  if (key.rfind(prefix, 0) != 0) return false;
  size_t dot = key.find('.', prefix.size());
  if (dot == std::string::npos) throw_unknown_key(key);
  std::string digits = key.substr(prefix.size(), dot - prefix.size());
  if (digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos)
    throw_unknown_key(key);
  index = std::stoul(digits);
  if (index >= parameters_.size())
    throw std::invalid_argument(type_name() + "::load_state_dict: key '" + key +
                                "' is for parameter " + digits + ", but this optimizer has " +
                                std::to_string(parameters_.size()) + " parameters");
  name = key.substr(dot + 1);
  return true;
}

void Optimizer::take_state_dict(StateDict dict) {
  struct Reset {
    Optimizer& optimizer;
    ~Reset() {
      optimizer.taking_ = false;
      optimizer.not_takeable_.clear();
    }
  } reset{*this};
  for (const Tensor& p : parameters_) not_takeable_.insert(p.impl().storage.get());
  taking_ = true;
  load_state_dict(dict);
}

bool Optimizer::can_take(const Tensor& src, size_t index) {
  const Tensor& p = parameters_[index];
  const TensorImpl& s = src.impl();
  if (!taking_ || s.dtype != p.dtype() || src.device() != p.device() || s.offset != 0 ||
      s.storage.use_count() != 1 || s.requires_grad || s.grad_fn)
    return false;
  return not_takeable_.insert(s.storage.get()).second;
}

Tensor Optimizer::state_like_parameter(const std::string& key, const Tensor& src, size_t index) {
  const Tensor& p = parameters_[index];
  if (!src.defined() || src.shape() != p.shape())
    throw std::invalid_argument(type_name() + "::load_state_dict: '" + key + "' has shape " +
                                (src.defined() ? to_string(src.shape()) : "undefined") +
                                " but parameter " + std::to_string(index) + " has shape " +
                                to_string(p.shape()));
  if (can_take(src, index)) {  // a tensor of its own around the storage, no autograd history
    auto taken = std::make_shared<TensorImpl>();
    taken->storage = src.impl().storage;
    taken->shape = src.shape();
    taken->dtype = src.dtype();
    return Tensor(std::move(taken));
  }
  NoGradGuard no_grad;
  Tensor copy = empty(p.shape(), {.dtype = p.dtype(), .device = p.device()});
  copy.copy_(src);
  return copy;
}

float Optimizer::option_value(const StateDict& dict, const std::string& key) {
  const Tensor& t = dict.at(key);
  if (t.numel() != 1)
    throw std::invalid_argument("optimizer option '" + key + "' must be a one-element tensor");
  return t.item();
}

void Optimizer::throw_unknown_key(const std::string& key) const {
  throw std::invalid_argument(type_name() + "::load_state_dict: unexpected key '" + key +
                              "' (is this the state of another optimizer type?)");
}

}  // namespace tensorplay::optim
