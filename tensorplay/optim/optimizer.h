// Optimizer base: holds parameters, clears their gradients, applies an update per step, and
// exports/imports its state (momentum buffers, moments, step counts) as a StateDict.
#pragma once

#include <string>
#include <unordered_set>
#include <vector>

#include "tensorplay/core/state_dict.h"
#include "tensorplay/core/tensor.h"

namespace tensorplay::optim {

/// Updates a list of parameters from their accumulated gradients.
class Optimizer {
 public:
  explicit Optimizer(std::vector<Tensor> parameters);
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  /// One update from the current gradients (parameters without a gradient are skipped).
  virtual void step() = 0;
  /// Clears every parameter's gradient (sets it to none, as PyTorch's default).
  void zero_grad();
  const std::vector<Tensor>& parameters() const { return parameters_; }
  /// "SGD", "AdamW": names the optimizer in messages.
  virtual std::string type_name() const = 0;

  // -- state -------------------------------------------------------------------------------------

  /// Hyper-parameters under "options.<name>" (float32 scalars) and per-parameter state under
  /// "state.<i>.<name>", i the parameter's index in parameters(). Tensors share storage with the
  /// optimizer's live state: copy them (or save them) before stepping again.
  virtual StateDict state_dict() const = 0;
  /// Restores hyper-parameters and state from state_dict() output (PyTorch restores the
  /// hyper-parameters too). State tensors are copied, never aliased. Throws
  /// std::invalid_argument naming the key on an unknown key, a parameter index out of range, or
  /// a state shape that differs from its parameter's; nothing changes when it throws.
  virtual void load_state_dict(const StateDict& dict) = 0;
  /// load_state_dict, except that a state tensor already as the optimizer would copy it (its
  /// parameter's dtype and device, at the start of a storage that no other tensor views, no
  /// parameter's, not taken for another entry) becomes the state itself, uncopied, so `dict`'s
  /// tensors must not be used afterwards; others are copied. Same checks, same errors, and
  /// nothing changes when it throws. For loaders that read state into fresh tensors.
  void take_state_dict(StateDict dict);

 protected:
  /// Splits "state.<i>.<name>" into i and name; false for other keys. Throws on a bad index.
  bool parse_state_key(const std::string& key, size_t& index, std::string& name) const;
  /// A copy of `src` on parameter i's device, checked to have its shape (within
  /// take_state_dict: `src` itself when it can be taken).
  Tensor state_like_parameter(const std::string& key, const Tensor& src, size_t index);
  /// The float value of an "options.*" scalar.
  static float option_value(const StateDict& dict, const std::string& key);
  [[noreturn]] void throw_unknown_key(const std::string& key) const;

  std::vector<Tensor> parameters_;

 private:
  bool can_take(const Tensor& src, size_t index);

  // Within take_state_dict: the storages that must not become state (the parameters' and those
  // taken so far).
  bool taking_ = false;
  std::unordered_set<const Storage*> not_takeable_;
};

}  // namespace tensorplay::optim
