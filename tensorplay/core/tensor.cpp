// Tensor handle methods and factories. Methods with autograd (to, reshape, slice0, clone) are
// defined with their ops in ops/.
#include "tensorplay/core/tensor.h"

#include <atomic>
#include <cstring>
#include <iomanip>
#include <sstream>
#include <stdexcept>

#include "tensorplay/core/backend.h"
#include "tensorplay/core/memory_accounting.h"

namespace tensorplay {

TensorImpl& Tensor::impl() const {
  if (!impl_) throw std::logic_error("operation on an undefined Tensor (default-constructed)");
  return *impl_;
}

int64_t Tensor::size(int64_t d) const { return shape()[wrap_dim(d, dim(), "size")]; }

void* Tensor::raw_data() const {
  return static_cast<char*>(impl().storage->data()) + impl().offset * element_size(dtype());
}

template <>
float* Tensor::data<float>() const {
  if (dtype() != DType::Float32)
    throw std::invalid_argument("data<float>() on a " + to_string(dtype()) + " tensor");
  return static_cast<float*>(raw_data());
}

template <>
uint16_t* Tensor::data<uint16_t>() const {
  if (dtype() != DType::BFloat16)
    throw std::invalid_argument("data<uint16_t>() on a " + to_string(dtype()) + " tensor");
  return static_cast<uint16_t*>(raw_data());
}

std::vector<float> Tensor::to_vector() const {
  Tensor host = to(tensorplay::cpu()).to(DType::Float32);
  const float* p = host.data<float>();
  return std::vector<float>(p, p + host.numel());
}

float Tensor::item() const {
  if (numel() != 1)
    throw std::invalid_argument("item() needs a one-element tensor, got shape " +
                                to_string(shape()));
  return to_vector()[0];
}

Tensor& Tensor::set_requires_grad(bool value) {
  if (!is_leaf())
    throw std::invalid_argument(
        "set_requires_grad on a non-leaf tensor: call detach() first to make a leaf");
  impl().requires_grad = value;
  return *this;
}

Tensor Tensor::grad() const { return impl().grad ? Tensor(impl().grad) : Tensor(); }

void Tensor::set_grad(const Tensor& grad) {
  if (grad.defined() && grad.shape() != shape())
    throw std::invalid_argument("set_grad: gradient shape " + to_string(grad.shape()) +
                                " differs from tensor shape " + to_string(shape()));
  impl().grad = grad.defined() ? grad.impl_ptr() : nullptr;
  if (grad.defined() && grad.impl().storage) grad.impl().storage->charge_as_gradient();
}

uint64_t Tensor::register_post_accumulate_grad_hook(PostAccumulateGradHook hook) const {
  if (!is_leaf())
    throw std::invalid_argument(
        "register_post_accumulate_grad_hook: the tensor is not a leaf (it has a grad_fn); only "
        "leaves accumulate gradients");
  if (!hook) throw std::invalid_argument("register_post_accumulate_grad_hook: the hook is empty");
  static std::atomic<uint64_t> next_id{0};
  const uint64_t id = ++next_id;
  impl().post_accumulate_hooks.emplace_back(id, std::move(hook));
  return id;
}

void Tensor::remove_post_accumulate_grad_hook(uint64_t id) const {
  auto& hooks = impl().post_accumulate_hooks;
  std::erase_if(hooks, [id](const auto& h) { return h.first == id; });
}

Tensor Tensor::detach() const {
  auto out = std::make_shared<TensorImpl>();
  out->storage = impl().storage;
  out->offset = impl().offset;
  out->shape = impl().shape;
  out->dtype = impl().dtype;
  return Tensor(std::move(out));
}

bool Tensor::shares_storage(const Tensor& other) const {
  return impl().storage == other.impl().storage && impl().offset == other.impl().offset;
}

void Tensor::copy_(const Tensor& src) {
  if (src.shape() != shape())
    throw std::invalid_argument("copy_: source shape " + to_string(src.shape()) +
                                " differs from destination shape " + to_string(shape()));
  if (src.dtype() != dtype()) {
    copy_(src.to(dtype()));
    return;
  }
  const Backend& b = backend_for(device().is_cuda() ? device() : src.device());
  b.copy(raw_data(), device(), src.raw_data(), src.device(), nbytes());
}

void Tensor::fill_(float value) {
  if (dtype() != DType::Float32) {
    copy_(full(shape(), value, {.device = device()}));
    return;
  }
  backend_for(device()).fill(data<float>(), numel(), value);
}

std::ostream& operator<<(std::ostream& os, const Tensor& t) {
  if (!t.defined()) return os << "Tensor(undefined)";
  os << "Tensor(shape=" << to_string(t.shape()) << ", dtype=" << to_string(t.dtype())
     << ", device=" << to_string(t.device());
  if (t.requires_grad()) os << ", requires_grad";
  if (t.numel() <= 64) {
    std::vector<float> v = t.to_vector();
    os << ", values=[";
    for (size_t i = 0; i < v.size(); ++i) os << (i ? ", " : "") << std::setprecision(6) << v[i];
    os << "]";
  }
  return os << ")";
}

std::string to_string(const Tensor& t) {
  std::ostringstream os;
  os << t;
  return os.str();
}

Tensor empty(const Shape& shape, TensorOptions options) {
  int64_t n = check_shape(shape, element_size(options.dtype), "tensor");
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = std::make_shared<Storage>(static_cast<size_t>(n) * element_size(options.dtype),
                                            options.device);
  impl->shape = shape;
  impl->dtype = options.dtype;
  impl->requires_grad = options.requires_grad;
  return Tensor(std::move(impl));
}

Tensor full(const Shape& shape, float value, TensorOptions options) {
  TensorOptions f32 = options;
  f32.dtype = DType::Float32;
  Tensor t = empty(shape, f32);
  backend_for(options.device).fill(t.data<float>(), t.numel(), value);
  if (options.dtype != DType::Float32) {
    t = t.to(options.dtype);
    t.impl().requires_grad = options.requires_grad;
  }
  return t;
}

Tensor zeros(const Shape& shape, TensorOptions options) { return full(shape, 0.0f, options); }
Tensor ones(const Shape& shape, TensorOptions options) { return full(shape, 1.0f, options); }

Tensor zeros_like(const Tensor& like) {
  return zeros(like.shape(), {.dtype = like.dtype(), .device = like.device()});
}

Tensor empty_like(const Tensor& like) {
  return empty(like.shape(), {.dtype = like.dtype(), .device = like.device()});
}

Tensor from_vector(const std::vector<float>& values, const Shape& shape, TensorOptions options) {
  if (static_cast<int64_t>(values.size()) != numel(shape))
    throw std::invalid_argument("from_vector: " + std::to_string(values.size()) +
                                " values do not fill shape " + to_string(shape));
  Tensor host = empty(shape, {});
  if (!values.empty()) std::memcpy(host.data<float>(), values.data(), values.size() * 4);
  Tensor t = host.to(options.device).to(options.dtype);
  t.impl().requires_grad = options.requires_grad;
  return t;
}

Tensor scalar_tensor(float value, TensorOptions options) { return full({}, value, options); }

Tensor arange(int64_t n, TensorOptions options) {
  if (n < 0) throw std::invalid_argument("arange: n must be >= 0, got " + std::to_string(n));
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = static_cast<float>(i);
  return from_vector(v, {n}, options);
}

}  // namespace tensorplay
