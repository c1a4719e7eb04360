// Module registration, traversal, printing and device moves.
#include "tensors/nn/module.h"

#include <functional>
#include <stdexcept>

#include "tensors/trace_hook.h"

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

Tensor Module::operator()(const Tensor& x) {
  trace::ModulePathScope scope(name_in_parent_, this);
  return forward(x);
}

Tensor Module::operator()(const std::vector<Tensor>& args, const TensorDict& kwargs) {
  trace::ModulePathScope scope(name_in_parent_, this);
  return forward_args(args, kwargs);
}

namespace {
void check_name(const std::string& name, const char* what) {
  if (name.empty() || name.find('.') != std::string::npos)
    throw std::invalid_argument(std::string(what) + " name '" + name +
                                "' must be non-empty and contain no '.'");
}
}  // namespace

Tensor Module::register_parameter(const std::string& name, Tensor tensor, bool requires_grad) {
  check_name(name, "parameter");
  for (const auto& t : tensors_)
    if (t.name == name) throw std::invalid_argument("parameter '" + name + "' already registered");
  if (tensor.defined()) {
    if (!tensor.is_leaf()) tensor = tensor.detach();
    tensor.set_requires_grad(requires_grad);
  }
  tensors_.push_back({name, tensor, true});
  return tensor;
}

Tensor Module::register_buffer(const std::string& name, Tensor tensor) {
  check_name(name, "buffer");
  for (const auto& t : tensors_)
    if (t.name == name) throw std::invalid_argument("buffer '" + name + "' already registered");
  tensors_.push_back({name, tensor, false});
  return tensor;
}

void Module::add_child(const std::string& name, std::shared_ptr<Module> module) {
  check_name(name, "submodule");
  if (!module) throw std::invalid_argument("register_module('" + name + "'): module is null");
  for (const auto& c : children_)
    if (c.first == name) throw std::invalid_argument("submodule '" + name + "' already registered");
  module->name_in_parent_ = name;
  children_.emplace_back(name, std::move(module));
}

void Module::collect(const std::string& prefix, bool parameters, bool recurse,
                     std::vector<std::pair<std::string, Tensor>>& out) const {
  for (const auto& t : tensors_)
    if (t.is_parameter == parameters && t.tensor.defined()) out.emplace_back(prefix + t.name, t.tensor);
  if (!recurse) return;
  for (const auto& [name, child] : children_) child->collect(prefix + name + ".", parameters, true, out);
}

std::vector<std::pair<std::string, Tensor>> Module::named_parameters(bool recurse) const {
  std::vector<std::pair<std::string, Tensor>> out;
  collect("", true, recurse, out);
  return out;
}

std::vector<Tensor> Module::parameters(bool recurse) const {
  std::vector<Tensor> out;
  for (auto& [name, t] : named_parameters(recurse)) out.push_back(t);
  return out;
}

std::vector<std::pair<std::string, Tensor>> Module::named_buffers(bool recurse) const {
  std::vector<std::pair<std::string, Tensor>> out;
  collect("", false, recurse, out);
  return out;
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
  std::vector<std::pair<std::string, Module*>> stack;
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
    std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
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

void Module::to(Device device) {
  for (auto& t : tensors_) {
    if (!t.tensor.defined() || t.tensor.device() == device) continue;
    // Move the storage under the same TensorImpl so every holder of the tensor sees the move.
    Tensor moved = t.tensor.detach().to(device);
    t.tensor.impl().storage = moved.impl().storage;
    t.tensor.impl().offset = moved.impl().offset;
    if (t.tensor.impl().grad) t.tensor.impl().grad = Tensor(t.tensor.impl().grad).to(device).impl_ptr();
  }
  for (auto& c : children_) c.second->to(device);
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
