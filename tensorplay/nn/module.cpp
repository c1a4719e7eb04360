// Module registration, traversal, printing and device moves.
#include "tensorplay/nn/module.h"

#include <functional>
#include <stdexcept>
#include <unordered_set>

#include "tensorplay/core/autograd/checkpoint.h"
#include "tensorplay/core/autograd/grad_mode.h"
#include "tensorplay/core/trace_hook.h"

namespace tensorplay::nn {

Tensor Module::forward(const Tensor&) {
  throw std::logic_error(type_name() +
                         " has no single-tensor forward: override forward(const Tensor&) or "
                         "forward_args(args, kwargs)");
}

Tensor Module::forward_args(const std::vector<Tensor>& args, const TensorDict& kwargs) {
  if (args.size() != 1 || !kwargs.empty())
    throw std::invalid_argument(type_name() + " takes one tensor input, got " +
                                std::to_string(args.size()) + " positional and " +
                                std::to_string(kwargs.size()) +
                                " keyword inputs; override forward_args to take more");
  return forward(args[0]);
}

std::vector<Tensor> Module::forward_outputs(const std::vector<Tensor>& args,
                                            const TensorDict& kwargs) {
  return {forward_args(args, kwargs)};
}

Tensor Module::hooked_forward(const std::vector<Tensor>& args, const TensorDict* kwargs) {
  std::vector<Tensor> in = args;
  for (const auto& hook : pre_hooks_) in = hook(in);
  Tensor out = kwargs != nullptr ? forward_args(in, *kwargs) : forward(in.at(0));
  for (const auto& hook : post_hooks_) out = hook(out);
  return out;
}

void Module::register_forward_pre_hook(ForwardPreHook hook, HookPlacement placement) {
  (placement == HookPlacement::AroundCheckpoint ? outer_pre_hooks_ : pre_hooks_)
      .push_back(std::move(hook));
}

void Module::register_forward_hook(ForwardHook hook, HookPlacement placement) {
  (placement == HookPlacement::AroundCheckpoint ? outer_post_hooks_ : post_hooks_)
      .push_back(std::move(hook));
}

Tensor Module::operator()(const Tensor& x) {
  if (outer_pre_hooks_.empty() && outer_post_hooks_.empty()) return call_checkpointed({x}, nullptr);
  std::vector<Tensor> in{x};
  for (const auto& hook : outer_pre_hooks_) in = hook(in);
  Tensor out = call_checkpointed(in, nullptr);
  for (const auto& hook : outer_post_hooks_) out = hook(out);
  return out;
}

Tensor Module::operator()(const std::vector<Tensor>& args, const TensorDict& kwargs) {
  if (outer_pre_hooks_.empty() && outer_post_hooks_.empty())
    return call_checkpointed(args, &kwargs);
  std::vector<Tensor> in = args;
  for (const auto& hook : outer_pre_hooks_) in = hook(in);
  Tensor out = call_checkpointed(in, &kwargs);
  for (const auto& hook : outer_post_hooks_) out = hook(out);
  return out;
}

Tensor Module::call_checkpointed(const std::vector<Tensor>& args, const TensorDict* kw_or_null) {
  trace::ModulePathScope scope(name_in_parent_, this);
  const bool hooked = !pre_hooks_.empty() || !post_hooks_.empty();
  if (kw_or_null == nullptr) {  // the one-tensor form
    if (!checkpointed_ || !autograd::grad_enabled())
      return hooked ? hooked_forward(args, nullptr) : forward(args.at(0));
    return autograd::checkpoint(
        [this, hooked](const std::vector<Tensor>& in) {
          return std::vector<Tensor>{hooked ? hooked_forward(in, nullptr) : forward(in[0])};
        },
        {args.at(0)})[0];
  }
  const TensorDict& kwargs = *kw_or_null;
  if (!checkpointed_ || !autograd::grad_enabled())
    return hooked ? hooked_forward(args, &kwargs) : forward_args(args, kwargs);
  // The keyword inputs follow the positional ones, in name order.
  std::vector<Tensor> inputs = args;
  std::vector<std::string> names;
  for (const auto& [name, t] : kwargs) {
    inputs.push_back(t);
    names.push_back(name);
  }
  const size_t positional = args.size();
  return autograd::checkpoint(
      [this, positional, names, hooked](const std::vector<Tensor>& in) {
        std::vector<Tensor> a(in.begin(), in.begin() + static_cast<std::ptrdiff_t>(positional));
        TensorDict kw;
        for (size_t i = 0; i < names.size(); ++i) kw.emplace(names[i], in[positional + i]);
        return std::vector<Tensor>{hooked ? hooked_forward(a, &kw) : forward_args(a, kw)};
      },
      inputs)[0];
}

namespace {
void check_name(const std::string& name, const char* what) {
  if (name.empty() || name.find('.') != std::string::npos)
    throw std::invalid_argument(std::string(what) + " name '" + name +
                                "' must be non-empty and contain no '.'");
}
}  // namespace

void Module::check_unique_name(const std::string& name, const char* what) const {
  check_name(name, what);
  for (const auto& t : tensors_)
    if (t.name == name)
      throw std::invalid_argument(std::string(what) + " '" + name + "': " + type_name() +
                                  " already has a " + (t.is_parameter ? "parameter" : "buffer") +
                                  " of that name");
  for (const auto& c : children_)
    if (c.first == name)
      throw std::invalid_argument(std::string(what) + " '" + name + "': " + type_name() +
                                  " already has a submodule of that name");
}

Tensor Module::register_parameter(const std::string& name, Tensor tensor, bool requires_grad) {
  check_unique_name(name, "parameter");
  if (tensor.defined()) {
    if (!tensor.is_leaf()) tensor = tensor.detach();
    tensor.set_requires_grad(requires_grad);
  }
  tensors_.push_back({name, tensor, true, true});
  return tensor;
}

Tensor Module::register_buffer(const std::string& name, Tensor tensor, bool persistent) {
  check_unique_name(name, "buffer");
  if (tensor.defined() && !tensor.is_leaf()) tensor = tensor.detach();
  tensors_.push_back({name, tensor, false, persistent});
  return tensor;
}

void Module::add_child(const std::string& name, std::shared_ptr<Module> module) {
  check_unique_name(name, "submodule");
  if (!module) throw std::invalid_argument("register_module('" + name + "'): module is null");
  module->name_in_parent_ = name;
  children_.emplace_back(name, std::move(module));
}

void Module::collect(const std::string& prefix, Kind kind, bool recurse,
                     std::vector<std::pair<std::string, Tensor>>& out) const {
  if (kind == Kind::State) {
    for (const auto& t : tensors_)
      if (t.is_parameter && t.tensor.defined()) out.emplace_back(prefix + t.name, t.tensor);
    for (const auto& t : tensors_)
      if (!t.is_parameter && t.persistent && t.tensor.defined())
        out.emplace_back(prefix + t.name, t.tensor);
  } else {
    bool parameters = kind == Kind::Parameters;
    for (const auto& t : tensors_)
      if (t.is_parameter == parameters && t.tensor.defined())
        out.emplace_back(prefix + t.name, t.tensor);
  }
  if (!recurse) return;
  for (const auto& [name, child] : children_) child->collect(prefix + name + ".", kind, true, out);
}

namespace {
// Keeps the first name of every tensor (tied weights appear once).
std::vector<std::pair<std::string, Tensor>> unique_by_identity(
    std::vector<std::pair<std::string, Tensor>> all) {
  std::unordered_set<const TensorImpl*> seen;
  std::vector<std::pair<std::string, Tensor>> out;
  for (auto& item : all)
    if (seen.insert(item.second.impl_ptr().get()).second) out.push_back(std::move(item));
  return out;
}
}  // namespace

std::vector<std::pair<std::string, Tensor>> Module::named_parameters(bool recurse) const {
  std::vector<std::pair<std::string, Tensor>> out;
  collect("", Kind::Parameters, recurse, out);
  return unique_by_identity(std::move(out));
}

std::vector<Tensor> Module::parameters(bool recurse) const {
  std::vector<Tensor> out;
  for (auto& [name, t] : named_parameters(recurse)) out.push_back(t);
  return out;
}

std::vector<std::pair<std::string, Tensor>> Module::named_buffers(bool recurse) const {
  std::vector<std::pair<std::string, Tensor>> out;
  collect("", Kind::Buffers, recurse, out);
  return unique_by_identity(std::move(out));
}

std::vector<Tensor> Module::buffers(bool recurse) const {
  std::vector<Tensor> out;
  for (auto& [name, t] : named_buffers(recurse)) out.push_back(t);
  return out;
}

std::vector<std::shared_ptr<Module>> Module::children() const {
  std::vector<std::shared_ptr<Module>> out;
  for (const auto& c : children_) out.push_back(c.second);
  return out;
}

std::vector<std::pair<std::string, std::shared_ptr<Module>>> Module::named_modules() {
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> out;
  out.emplace_back("", shared_from_this());
  std::function<void(const std::string&, Module&)> walk = [&](const std::string& prefix,
                                                              Module& m) {
    for (auto& [name, child] : m.children_) {
      std::string path = prefix.empty() ? name : prefix + "." + name;
      out.emplace_back(path, child);
      walk(path, *child);
    }
  };
  walk("", *this);
  return out;
}

std::shared_ptr<Module> Module::find_module(const std::string& path) {
  if (path.empty()) return shared_from_this();
  Module* m = this;
  std::shared_ptr<Module> found;
  size_t start = 0;
  while (start <= path.size()) {
    size_t dot = path.find('.', start);
    std::string part =
        path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    found = nullptr;
    for (auto& [name, child] : m->children_)
      if (name == part) found = child;
    if (!found) return nullptr;
    m = found.get();
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return found;
}

Tensor Module::find_tensor(const std::string& path) const {
  size_t dot = path.rfind('.');
  const Module* owner = this;
  std::string leaf = path;
  if (dot != std::string::npos) {
    auto m = const_cast<Module*>(this)->find_module(path.substr(0, dot));
    if (!m) return Tensor();
    owner = m.get();
    leaf = path.substr(dot + 1);
  }
  for (const auto& t : owner->tensors_)
    if (t.name == leaf) return t.tensor;
  return Tensor();
}

void Module::train(bool on) {
  training_ = on;
  for (auto& c : children_) c.second->train(on);
}

void Module::zero_grad() {
  for (Tensor& p : parameters()) p.set_grad(Tensor());
}

void Module::replace_tensor(const std::string& name, Tensor tensor) {
  for (auto& t : tensors_) {
    if (t.name != name) continue;
    t.tensor = tensor;
    return;
  }
  throw std::invalid_argument("no parameter or buffer named '" + name + "' in " + type_name());
}

StateDict Module::state_dict() const {
  std::vector<std::pair<std::string, Tensor>> all;
  collect("", Kind::State, true, all);
  StateDict out;
  for (auto& [name, tensor] : all) out.insert(name, tensor.detach());
  return out;
}

LoadStateDictResult Module::load_state_dict(const StateDict& dict, bool strict) {
  std::vector<std::pair<std::string, Tensor>> own;
  collect("", Kind::State, true, own);
  LoadStateDictResult result;
  std::vector<std::string> mismatches;
  std::unordered_set<std::string> own_names;
  for (const auto& [name, tensor] : own) {
    own_names.insert(name);
    const Tensor* src = dict.find(name);
    if (!src) {
      result.missing_keys.push_back(name);
    } else if (!src->defined() || src->shape() != tensor.shape()) {
      mismatches.push_back("'" + name + "': checkpoint " +
                           (src->defined() ? to_string(src->shape()) : "undefined") + ", module " +
                           to_string(tensor.shape()));
    }
  }
  for (const auto& [name, tensor] : dict)
    if (!own_names.count(name)) result.unexpected_keys.push_back(name);
  auto join = [](const std::vector<std::string>& names, bool quote) {
    std::string s;
    for (const auto& n : names) s += (s.empty() ? "" : ", ") + (quote ? "'" + n + "'" : n);
    return s;
  };
  std::string errors;
  if (!mismatches.empty()) errors += "\n  shape mismatch for " + join(mismatches, false);
  if (strict && !result.missing_keys.empty())
    errors += "\n  missing keys: " + join(result.missing_keys, true);
  if (strict && !result.unexpected_keys.empty())
    errors += "\n  unexpected keys: " + join(result.unexpected_keys, true);
  bool key_errors = strict && (!result.missing_keys.empty() || !result.unexpected_keys.empty());
  if (key_errors) errors += "\n  (pass strict=false to load only the matching keys)";
  if (!errors.empty())
    throw std::invalid_argument("load_state_dict into " + type_name() +
                                " failed; nothing was loaded:" + errors);
  NoGradGuard no_grad;
  for (auto& [name, tensor] : own)
    if (const Tensor* src = dict.find(name)) tensor.copy_(*src);
  return result;
}

namespace {
// Moves or converts `t` (and its gradient) to `target`, a Device or a DType, under the same
// TensorImpl, so every holder of the tensor (an optimizer, a tied module) sees the change.
template <typename Target>
void convert_in_place(const Tensor& t, Target target) {
  Tensor converted = t.detach().to(target);
  TensorImpl& impl = t.impl();
  impl.storage = converted.impl().storage;
  impl.offset = converted.impl().offset;
  impl.dtype = converted.dtype();
  if (impl.grad) impl.grad = Tensor(impl.grad).to(target).impl_ptr();
}
}  // namespace

void Module::to(Device device) {
  for (auto& t : tensors_)
    if (t.tensor.defined() && t.tensor.device() != device) convert_in_place(t.tensor, device);
  for (auto& c : children_) c.second->to(device);
}

void Module::to(DType dtype) {
  for (auto& t : tensors_)
    if (t.is_parameter && t.tensor.defined() && t.tensor.dtype() != dtype)
      convert_in_place(t.tensor, dtype);
  for (auto& c : children_) c.second->to(dtype);
}

void Module::pretty_print(std::ostream& os, int indent) const {
  os << type_name() << "(";
  std::string extra = extra_repr();
  if (children_.empty()) {
    os << extra << ")";
    return;
  }
  if (!extra.empty()) os << extra;
  os << "\n";
  for (const auto& [name, child] : children_) {
    os << std::string(indent + 2, ' ') << "(" << name << "): ";
    child->pretty_print(os, indent + 2);
    os << "\n";
  }
  os << std::string(indent, ' ') << ")";
}

std::ostream& operator<<(std::ostream& os, const Module& module) {
  module.pretty_print(os);
  return os;
}

}  // namespace tensorplay::nn
