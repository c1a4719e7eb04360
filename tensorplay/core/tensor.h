// The Tensor handle: a shaped, typed, contiguous view of shared storage plus its autograd
// metadata. Copies of a Tensor share everything, as in libtorch.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "tensorplay/core/device.h"
#include "tensorplay/core/dtype.h"
#include "tensorplay/core/shape.h"
#include "tensorplay/core/storage.h"

namespace tensorplay {

namespace autograd {
class Node;
}
class Tensor;

/// Called after autograd accumulated a gradient into a leaf's .grad, with the leaf.
using PostAccumulateGradHook = std::function<void(const Tensor& leaf)>;

/// Shared state behind Tensor handles. Contiguous row-major layout starting at `offset` elements.
struct TensorImpl {
  std::shared_ptr<Storage> storage;
  int64_t offset = 0;
  Shape shape;
  DType dtype = DType::Float32;
  bool requires_grad = false;
  std::shared_ptr<autograd::Node> grad_fn;  // null for leaves
  std::shared_ptr<TensorImpl> grad;         // accumulated gradient of a leaf
  std::vector<std::pair<uint64_t, PostAccumulateGradHook>> post_accumulate_hooks;  // by id
};

/// Options for tensor factories.
struct TensorOptions {
  DType dtype = DType::Float32;
  Device device;
  bool requires_grad = false;
};

/// A multi-dimensional array with autograd. Default-constructed tensors are undefined.
class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  // -- observers ---------------------------------------------------------------------------------

  bool defined() const { return impl_ != nullptr; }
  const Shape& shape() const { return impl().shape; }
  const Shape& sizes() const { return impl().shape; }
  int64_t dim() const { return static_cast<int64_t>(impl().shape.size()); }
  /// Size of dimension `d` (negative counts from the end).
  int64_t size(int64_t d) const;
  int64_t numel() const { return tensorplay::numel(impl().shape); }
  DType dtype() const { return impl().dtype; }
  Device device() const { return impl().storage->device(); }
  bool is_cuda() const { return device().is_cuda(); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * element_size(dtype()); }

  /// Pointer to the first element (device memory for CUDA tensors).
  void* raw_data() const;
  /// Typed pointer to the first element; checks the dtype (float for Float32, uint16_t for
  /// BFloat16).
  template <typename T>
  T* data() const;

  /// The single value of a one-element tensor, as float (copied to the host if needed).
  float item() const;
  /// All elements as floats on the host, row-major.
  std::vector<float> to_vector() const;

  // -- autograd ----------------------------------------------------------------------------------

  bool requires_grad() const { return impl().requires_grad; }
  /// Marks a leaf as requiring gradients; returns *this. Throws on non-leaves.
  Tensor& set_requires_grad(bool value);
  Tensor& requires_grad_(bool value = true) { return set_requires_grad(value); }
  bool is_leaf() const { return impl().grad_fn == nullptr; }
  const std::shared_ptr<autograd::Node>& grad_fn() const { return impl().grad_fn; }
  /// Accumulated gradient (undefined until a backward reaches this leaf).
  Tensor grad() const;
  void set_grad(const Tensor& grad);
  /// PyTorch's register_post_accumulate_grad_hook: `hook` runs on the backward's thread each
  /// time autograd has accumulated a gradient into this leaf's .grad (not on set_grad). Returns
  /// an id for remove_post_accumulate_grad_hook. Register and remove outside backward passes.
  uint64_t register_post_accumulate_grad_hook(PostAccumulateGradHook hook) const;
  void remove_post_accumulate_grad_hook(uint64_t id) const;
  /// Same data, no history, requires_grad false.
  Tensor detach() const;
  /// Full backward from this tensor (a scalar unless `grad` is given).
  void backward(const Tensor& grad = Tensor()) const;

  // -- conversions and views ---------------------------------------------------------------------

  /// Copy to another device (or this tensor when already there).
  Tensor to(Device device) const;
  /// Copy to another dtype (or this tensor when already of it).
  Tensor to(DType dtype) const;
  Tensor cpu() const { return to(tensorplay::cpu()); }
  /// Same storage, new shape with the same element count (one size may be -1).
  Tensor reshape(Shape shape) const;
  Tensor view(Shape shape) const { return reshape(std::move(shape)); }
  /// Elements [start, end) of dimension 0, sharing storage.
  Tensor slice0(int64_t start, int64_t end) const;
  /// Deep copy with the same autograd history as `*this` (gradient flows through).
  Tensor clone() const;

  // -- in-place (no autograd; for optimizers and initialisation) ---------------------------------

  /// Copies `src` (same shape; any device/dtype) into this tensor's storage.
  void copy_(const Tensor& src);
  void fill_(float value);
  void zero_() { fill_(0.0f); }

  TensorImpl& impl() const;
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }
  bool is_same(const Tensor& other) const { return impl_ == other.impl_; }
  /// Whether both view the same memory (same storage and offset).
  bool shares_storage(const Tensor& other) const;

 private:
  std::shared_ptr<TensorImpl> impl_;
};

/// Prints shape, dtype, device and (for small tensors) the values.
std::ostream& operator<<(std::ostream& os, const Tensor& tensor);
std::string to_string(const Tensor& tensor);

// -- factories ------------------------------------------------------------------------------------

/// Uninitialised tensor.
Tensor empty(const Shape& shape, TensorOptions options = {});
Tensor zeros(const Shape& shape, TensorOptions options = {});
Tensor ones(const Shape& shape, TensorOptions options = {});
Tensor full(const Shape& shape, float value, TensorOptions options = {});
Tensor zeros_like(const Tensor& like);
Tensor empty_like(const Tensor& like);
/// A tensor holding `values` (row-major) with `shape`.
Tensor from_vector(const std::vector<float>& values, const Shape& shape,
                   TensorOptions options = {});
/// A scalar (shape []).
Tensor scalar_tensor(float value, TensorOptions options = {});
/// 0, 1, ..., n-1 as float32.
Tensor arange(int64_t n, TensorOptions options = {});

}  // namespace tensorplay
