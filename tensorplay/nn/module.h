// Module: the libtorch-style building block with named children, parameters and buffers, and
// ModuleHolder, the value-like handle (`Linear`, `Sequential`) that shares one module instance.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <ostream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "tensorplay/core/state_dict.h"
#include "tensorplay/core/tensor.h"

namespace tensorplay::nn {

/// Keyword arguments of a forward call.
using TensorDict = std::map<std::string, Tensor>;

/// What load_state_dict found besides the tensors it loaded (empty lists when strict succeeds).
struct LoadStateDictResult {
  std::vector<std::string> missing_keys;     // expected by the module, absent from the dict
  std::vector<std::string> unexpected_keys;  // present in the dict, unknown to the module
};

/// Base class of every layer and model.
class Module : public std::enable_shared_from_this<Module> {
 public:
  Module() = default;
  virtual ~Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  // -- forward -----------------------------------------------------------------------------------

  /// Single-input forward; modules with one tensor input override this.
  virtual Tensor forward(const Tensor& x);
  /// General forward with positional and keyword inputs; the default calls forward(args[0]).
  virtual Tensor forward_args(const std::vector<Tensor>& args, const TensorDict& kwargs);
  /// Forward for modules with several outputs (a pipeline stage passing skip values on); the
  /// default wraps forward_args' single output.
  virtual std::vector<Tensor> forward_outputs(const std::vector<Tensor>& args,
                                              const TensorDict& kwargs);
  /// Runs forward inside this module's name scope (module paths for tracing); under
  /// autograd::checkpoint when the module is checkpointed and grad mode is on.
  Tensor operator()(const Tensor& x);
  Tensor operator()(const std::vector<Tensor>& args, const TensorDict& kwargs = {});

  // -- registration ------------------------------------------------------------------------------

  /// Adds a parameter (a leaf that requires grad unless told otherwise); returns it.
  Tensor register_parameter(const std::string& name, Tensor tensor, bool requires_grad = true);
  /// Adds a buffer (state that is not trained); returns it. A persistent buffer is part of the
  /// state_dict; a non-persistent one (derived data such as position ids) is not, as in PyTorch.
  Tensor register_buffer(const std::string& name, Tensor tensor, bool persistent = true);
  /// Adds a child module; returns it.
  template <typename M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> module) {
    add_child(name, module);
    return module;
  }
  template <typename Holder, typename = typename Holder::ImplType>
  Holder register_module(const std::string& name, Holder holder) {
    add_child(name, holder.ptr());
    return holder;
  }

  // -- hooks -------------------------------------------------------------------------------------

  /// Rewrites the positional inputs before forward (PyTorch's forward pre-hook).
  using ForwardPreHook = std::function<std::vector<Tensor>(const std::vector<Tensor>& args)>;
  /// Rewrites the output after forward (PyTorch's forward hook).
  using ForwardHook = std::function<Tensor(const Tensor& output)>;
  /// Where a hook runs on a checkpointed module (set_checkpointed): inside the checkpoint, so that
  /// the backward's recomputation runs it again (as a hook on the module that
  /// torch's checkpoint_wrapper wraps: tensor parallelism's collectives), or around it, once per
  /// call (as a hook on the wrapper itself: fully_shard's gathering and resharding). The same for
  /// a module that is not checkpointed.
  enum class HookPlacement { InsideCheckpoint, AroundCheckpoint };
  /// Adds a hook that operator() runs on the inputs before forward, after the earlier ones (so
  /// inside a checkpoint's recomputation too). Tensor parallelism places its collectives so.
  /// Hooks placed around the checkpoint run before those inside it.
  void register_forward_pre_hook(ForwardPreHook hook,
                                 HookPlacement placement = HookPlacement::InsideCheckpoint);
  /// Adds a hook that operator() runs on the output after forward, after the earlier ones; hooks
  /// placed around the checkpoint run after those inside it.
  void register_forward_hook(ForwardHook hook,
                             HookPlacement placement = HookPlacement::InsideCheckpoint);

  // -- observers ---------------------------------------------------------------------------------

  /// Parameters with dotted paths ("layer1.net.0.weight"), depth first in registration order.
  /// A tensor registered under several names (tied weights) is listed once, under the first
  /// name met, as PyTorch's named_parameters does; so optimizers update it once.
  std::vector<std::pair<std::string, Tensor>> named_parameters(bool recurse = true) const;
  std::vector<Tensor> parameters(bool recurse = true) const;
  /// Buffers (persistent or not) with dotted paths, de-duplicated like named_parameters.
  std::vector<std::pair<std::string, Tensor>> named_buffers(bool recurse = true) const;
  std::vector<Tensor> buffers(bool recurse = true) const;
  /// Direct children in registration order.
  const std::vector<std::pair<std::string, std::shared_ptr<Module>>>& named_children() const {
    return children_;
  }
  std::vector<std::shared_ptr<Module>> children() const;
  /// Every module below (and including, with path "") this one, with dotted paths.
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> named_modules();
  /// The module at a dotted path, or null.
  std::shared_ptr<Module> find_module(const std::string& path);
  /// This module's parameter or buffer at a dotted path, or an undefined tensor.
  Tensor find_tensor(const std::string& path) const;
  /// Type name for printing ("Linear").
  virtual std::string type_name() const { return "Module"; }
  /// Extra text in the printed form ("in_features=128, out_features=128").
  virtual std::string extra_repr() const { return ""; }

  // -- mode and state ----------------------------------------------------------------------------

  virtual void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }
  /// Whether calls through operator() run forward under autograd::checkpoint, keeping only the
  /// inputs for the backward, which recomputes the forward (nn::checkpoint_wrapper sets it). The
  /// module must then live until the backward has run.
  bool is_checkpointed() const { return checkpointed_; }
  void set_checkpointed(bool on = true) { checkpointed_ = on; }
  /// Clears the gradients of every parameter.
  void zero_grad();
  /// Moves parameters and buffers to `device` in place (the tensors keep their identity).
  void to(Device device);
  /// Converts the parameters (and their gradients) to `dtype` in place, as `model->to(kBFloat16)`
  /// does in libtorch. Buffers keep their dtype: here they often hold indices (GPT's positions),
  /// which bfloat16 cannot count past 256.
  void to(DType dtype);
  /// Replaces a registered parameter or buffer's tensor (same name), used when loading or moving.
  void replace_tensor(const std::string& name, Tensor tensor);

  // -- state dict --------------------------------------------------------------------------------

  /// Every parameter, then every persistent buffer, of this module, then of each child in
  /// registration order, under dotted names. Tensors are detached and share storage with the
  /// module. Unlike named_parameters, tied tensors appear under every name ("wte.weight" and
  /// "lm_head.weight"), as in PyTorch, so a checkpoint can be loaded whether or not it was tied.
  StateDict state_dict() const;
  /// Copies the dict's tensors into this module's parameters and buffers in place (tensor
  /// identity, device and dtype are kept; tied tensors stay tied). Checks everything before
  /// copying anything: a shape mismatch always throws std::invalid_argument; with `strict`, so
  /// do missing and unexpected keys, each named in the message. Without `strict` they are
  /// returned instead.
  LoadStateDictResult load_state_dict(const StateDict& dict, bool strict = true);

  /// Name this module was registered under in its parent ("" for a root).
  const std::string& name_in_parent() const { return name_in_parent_; }

  /// Indented tree of children with their extra_repr.
  void pretty_print(std::ostream& os, int indent = 0) const;

 protected:
  void add_child(const std::string& name, std::shared_ptr<Module> module);

 private:
  struct NamedTensor {
    std::string name;
    Tensor tensor;
    bool is_parameter;
    bool persistent = true;
  };
  enum class Kind { Parameters, Buffers, State };
  void collect(const std::string& prefix, Kind kind, bool recurse,
               std::vector<std::pair<std::string, Tensor>>& out) const;
  void check_unique_name(const std::string& name, const char* what) const;
  // forward / forward_args with the hooks inside the checkpoint around them.
  Tensor hooked_forward(const std::vector<Tensor>& args, const TensorDict* kwargs);
  // operator() without the hooks around the checkpoint.
  Tensor call_checkpointed(const std::vector<Tensor>& args, const TensorDict* kwargs);

  std::vector<NamedTensor> tensors_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  std::vector<ForwardPreHook> pre_hooks_, outer_pre_hooks_;
  std::vector<ForwardHook> post_hooks_, outer_post_hooks_;
  std::string name_in_parent_;
  bool training_ = true;
  bool checkpointed_ = false;
};

std::ostream& operator<<(std::ostream& os, const Module& module);

/// Value-like handle to a module implementation, as libtorch's ModuleHolder.
template <typename Impl>
class ModuleHolder {
 public:
  using ImplType = Impl;
  /// A new default-constructed implementation, as in libtorch (`ReLU()`, `Sequential()`).
  ModuleHolder() requires std::is_default_constructible_v<Impl> : impl_(std::make_shared<Impl>()) {}
  /// An empty holder (assign later, typically from register_module).
  ModuleHolder(std::nullptr_t) {}  // NOLINT
  /// Wraps an existing implementation.
  ModuleHolder(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}  // NOLINT
  /// Constructs a new implementation from arguments.
  template <typename First, typename... Rest>
  requires(!std::is_same_v<std::decay_t<First>, ModuleHolder> &&
           !std::is_same_v<std::decay_t<First>, std::shared_ptr<Impl>> &&
           !std::is_same_v<std::decay_t<First>, std::nullptr_t> &&
           std::is_constructible_v<Impl, First, Rest...>) explicit ModuleHolder(First&& first,
                                                                                Rest&&... rest)
      : impl_(std::make_shared<Impl>(std::forward<First>(first), std::forward<Rest>(rest)...)) {}

  Impl* operator->() const { return impl_.get(); }
  Impl& operator*() const { return *impl_; }
  const std::shared_ptr<Impl>& ptr() const { return impl_; }
  bool is_empty() const { return impl_ == nullptr; }
  explicit operator bool() const { return impl_ != nullptr; }

  template <typename... Args>
  Tensor operator()(Args&&... args) const {
    return (*impl_)(std::forward<Args>(args)...);
  }

 private:
  std::shared_ptr<Impl> impl_;
};

/// Defines `Name` as the holder of `NameImpl`.
#define TENSORPLAY_MODULE(Name)                                     \
  class Name : public ::tensorplay::nn::ModuleHolder<Name##Impl> {  \
   public:                                                          \
    using ::tensorplay::nn::ModuleHolder<Name##Impl>::ModuleHolder; \
  }

}  // namespace tensorplay::nn
