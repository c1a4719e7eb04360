// Shape ops: reshape and dim-0 slices share storage; cat, narrow, permute and clone copy.
#include "tensorplay/core/ops/shape_ops.h"

#include <cstdint>
#include <stdexcept>
#include <string>

#include "tensorplay/core/autograd/node.h"
#include "tensorplay/core/backend.h"
#include "tensorplay/core/ops/detail/op_support.h"
#include "tensorplay/core/trace_hook.h"

namespace tensorplay {
namespace {

Tensor view_of(const Tensor& x, Shape shape, int64_t extra_offset) {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = x.impl().storage;
  impl->offset = x.impl().offset + extra_offset;
  impl->shape = std::move(shape);
  impl->dtype = x.dtype();
  return Tensor(std::move(impl));
}

// Copies a [outer, length, inner] block of `src` (with `src_dim` rows) into `dst` (with
// `dst_dim` rows) at row offsets.
void copy_block(const Tensor& src, int64_t src_rows, int64_t src_start, const Tensor& dst,
                int64_t dst_rows, int64_t dst_start, int64_t outer, int64_t length, int64_t inner) {
  const Backend& b = detail::backend_of(src);
  size_t es = element_size(src.dtype());
  auto* s = static_cast<const char*>(src.raw_data());
  auto* d = static_cast<char*>(dst.raw_data());
  for (int64_t o = 0; o < outer; ++o) {
    b.copy(d + ((o * dst_rows + dst_start) * inner) * es, dst.device(),
           s + ((o * src_rows + src_start) * inner) * es, src.device(), length * inner * es);
  }
}

struct ReshapeBackward : autograd::Node {
  Shape input_shape;
  const char* name() const override { return "ReshapeBackward"; }
  std::vector<Tensor> apply(const Tensor& g, const std::vector<bool>&) override {
    return {g.detach().reshape(input_shape)};
  }
};

struct NarrowBackward : autograd::Node {
  Shape input_shape;
  int64_t dim, start;
  const char* name() const override { return "NarrowBackward"; }
  std::vector<Tensor> apply(const Tensor& g, const std::vector<bool>&) override {
    Tensor out = zeros(input_shape, {.dtype = g.dtype(), .device = g.device()});
    int64_t outer = numel_range(input_shape, 0, dim);
    int64_t inner = numel_range(input_shape, dim + 1, input_shape.size());
    copy_block(g, g.shape()[dim], 0, out, input_shape[dim], start, outer, g.shape()[dim], inner);
    return {out};
  }
};

struct CatBackward : autograd::Node {
  std::vector<int64_t> lengths;
  int64_t dim;
  const char* name() const override { return "CatBackward"; }
  std::vector<Tensor> apply(const Tensor& g, const std::vector<bool>& needed) override {
    std::vector<Tensor> grads(lengths.size());
    int64_t start = 0;
    for (size_t i = 0; i < lengths.size(); ++i) {
      if (needed[i]) grads[i] = narrow(g.detach(), dim, start, lengths[i]);
      start += lengths[i];
    }
    return grads;
  }
};

// Contiguous copy of x with output dim i = input dim perm[i]. No autograd.
Tensor permute_kernel(const Tensor& x, const std::vector<int64_t>& perm) {
  int rank = static_cast<int>(x.dim());
  Shape out_shape(rank);
  std::vector<int64_t> in_strides(rank), strides(rank);
  int64_t stride = 1;
  for (int d = rank - 1; d >= 0; --d) {
    in_strides[d] = stride;
    stride *= x.shape()[d];
  }
  for (int d = 0; d < rank; ++d) {
    out_shape[d] = x.shape()[perm[d]];
    strides[d] = in_strides[perm[d]];
  }
  Tensor out = empty(out_shape, {.device = x.device()});
  if (out.numel() > 0)
    detail::backend_of(x).strided_copy(x.data<float>(), strides.data(), out.data<float>(),
                                       out_shape.data(), rank);
  return out;
}

struct PermuteBackward : autograd::Node {
  std::vector<int64_t> inverse;
  const char* name() const override { return "PermuteBackward"; }
  std::vector<Tensor> apply(const Tensor& g, const std::vector<bool>&) override {
    return {permute_kernel(g, inverse)};
  }
};

struct CloneBackward : autograd::Node {
  const char* name() const override { return "CloneBackward"; }
  std::vector<Tensor> apply(const Tensor& g, const std::vector<bool>&) override { return {g}; }
};

}  // namespace

Tensor reshape(const Tensor& x, Shape shape) {
  const Shape requested = shape;  // replayed as asked: a -1 adapts to another batch size
  int64_t known = 1, infer = -1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      if (infer >= 0)
        throw std::invalid_argument("reshape: only one size may be -1 (inferred), got " +
                                    to_string(requested));
      infer = static_cast<int64_t>(i);
    } else if (shape[i] < 0) {
      throw std::invalid_argument("reshape: size " + std::to_string(shape[i]) + " of dimension " +
                                  std::to_string(i) + " in " + to_string(requested) +
                                  " is invalid; sizes must be >= 0, or -1 for one size inferred "
                                  "from the others");
    } else {
      known = checked_mul(known, shape[i], "reshape");
    }
  }
  if (infer >= 0) {
    if (known == 0)
      throw std::invalid_argument("reshape: the -1 in " + to_string(requested) +
                                  " is ambiguous because the other sizes multiply to 0; give "
                                  "every size explicitly");
    if (x.numel() % known == 0) shape[infer] = x.numel() / known;
  }
  if (infer >= 0 ? shape[infer] < 0 : numel(shape) != x.numel())
    throw std::invalid_argument("reshape: cannot view shape " + to_string(x.shape()) + " (" +
                                std::to_string(x.numel()) + " elements) as " +
                                to_string(requested));
  Tensor out = view_of(x, shape, 0);
  auto node = std::make_shared<ReshapeBackward>();
  node->input_shape = x.shape();
  out = autograd::attach(out, node, {x});
  return trace::record("reshape", {x}, out, [requested](const std::vector<Tensor>& in) {
    return reshape(in[0], requested);
  });
}

Tensor slice0(const Tensor& x, int64_t start, int64_t end) {
  if (x.dim() == 0) throw std::invalid_argument("slice0: cannot slice a scalar tensor");
  if (start < 0 || end < start || end > x.shape()[0])
    throw std::invalid_argument("slice0: rows [" + std::to_string(start) + ", " +
                                std::to_string(end) + ") out of range for shape " +
                                to_string(x.shape()));
  Shape shape = x.shape();
  shape[0] = end - start;
  Tensor out = view_of(x, shape, start * numel_range(x.shape(), 1, x.dim()));
  auto node = std::make_shared<NarrowBackward>();
  node->input_shape = x.shape();
  node->dim = 0;
  node->start = start;
  out = autograd::attach(out, node, {x});
  return trace::record("slice0", {x}, out, [start, end](const std::vector<Tensor>& in) {
    return slice0(in[0], start, end);
  });
}

Tensor narrow(const Tensor& x, int64_t dim, int64_t start, int64_t length) {
  dim = wrap_dim(dim, x.dim(), "narrow");
  if (dim == 0) {
    if (length < 0 || start > INT64_MAX - length)
      throw std::invalid_argument("narrow: start " + std::to_string(start) + ", length " +
                                  std::to_string(length) + " out of range for dim 0 of shape " +
                                  to_string(x.shape()));
    return slice0(x, start, start + length);
  }
  if (start < 0 || length < 0 || start > x.shape()[dim] || length > x.shape()[dim] - start)
    throw std::invalid_argument("narrow: start " + std::to_string(start) + ", length " +
                                std::to_string(length) + " out of range for dim " +
                                std::to_string(dim) + " of shape " + to_string(x.shape()));
  Shape shape = x.shape();
  shape[dim] = length;
  Tensor out = empty(shape, {.dtype = x.dtype(), .device = x.device()});
  int64_t outer = numel_range(x.shape(), 0, dim);
  int64_t inner = numel_range(x.shape(), dim + 1, x.dim());
  copy_block(x, x.shape()[dim], start, out, length, 0, outer, length, inner);
  auto node = std::make_shared<NarrowBackward>();
  node->input_shape = x.shape();
  node->dim = dim;
  node->start = start;
  out = autograd::attach(out, node, {x});
  return trace::record("narrow", {x}, out, [dim, start, length](const std::vector<Tensor>& in) {
    return narrow(in[0], dim, start, length);
  });
}

Tensor cat(const std::vector<Tensor>& tensors, int64_t dim) {
  if (tensors.empty()) throw std::invalid_argument("cat: needs at least one tensor");
  const Tensor& first = tensors[0];
  if (first.dim() == 0)
    throw std::invalid_argument(
        "cat: tensor 0 is zero-dimensional and cannot be concatenated; reshape it to [1] first");
  dim = wrap_dim(dim, first.dim(), "cat");
  Shape shape = first.shape();
  int64_t total = 0;
  std::vector<int64_t> lengths;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    detail::check_same_device("cat", first, t);
    Shape s = t.shape();
    bool ok = s.size() == shape.size() && t.dtype() == first.dtype();
    for (size_t d = 0; ok && d < s.size(); ++d)
      ok = d == static_cast<size_t>(dim) || s[d] == shape[d];
    if (!ok)
      throw std::invalid_argument("cat: tensor " + std::to_string(i) + " has shape " +
                                  to_string(s) + ", incompatible with " + to_string(shape) +
                                  " along dim " + std::to_string(dim));
    lengths.push_back(s[dim]);
    total = checked_add(total, s[dim], "cat");
  }
  shape[dim] = total;
  Tensor out = empty(shape, {.dtype = first.dtype(), .device = first.device()});
  int64_t outer = numel_range(shape, 0, dim);
  int64_t inner = numel_range(shape, dim + 1, shape.size());
  int64_t start = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    copy_block(tensors[i], lengths[i], 0, out, total, start, outer, lengths[i], inner);
    start += lengths[i];
  }
  auto node = std::make_shared<CatBackward>();
  node->lengths = lengths;
  node->dim = dim;
  out = autograd::attach(out, node, tensors);
  return trace::record("cat", tensors, out,
                       [dim](const std::vector<Tensor>& in) { return cat(in, dim); });
}

Tensor clone(const Tensor& x) {
  Tensor out = empty(x.shape(), {.dtype = x.dtype(), .device = x.device()});
  detail::backend_of(x).copy(out.raw_data(), out.device(), x.raw_data(), x.device(), x.nbytes());
  out = autograd::attach(out, std::make_shared<CloneBackward>(), {x});
  return trace::record("clone", {x}, out,
                       [](const std::vector<Tensor>& in) { return clone(in[0]); });
}

Tensor permute(const Tensor& x, const std::vector<int64_t>& dims) {
  detail::check_defined("permute", x, "input");
  if (x.dtype() == DType::BFloat16)
    return detail::in_float32(
        {x}, x.dtype(), [dims](const std::vector<Tensor>& in) { return permute(in[0], dims); });
  if (static_cast<int64_t>(dims.size()) != x.dim() || x.dim() > 8)
    throw std::invalid_argument("permute: " + std::to_string(dims.size()) +
                                " dimensions given for a tensor of shape " + to_string(x.shape()) +
                                " (give one per dimension, at most 8)");
  std::vector<int64_t> perm(dims.size()), inverse(dims.size(), -1);
  for (size_t i = 0; i < dims.size(); ++i) {
    perm[i] = wrap_dim(dims[i], x.dim(), "permute");
    if (inverse[perm[i]] >= 0)
      throw std::invalid_argument("permute: dimension " + std::to_string(dims[i]) +
                                  " appears twice; dims must be a permutation of 0.." +
                                  std::to_string(x.dim() - 1));
    inverse[perm[i]] = static_cast<int64_t>(i);
  }
  Tensor out = permute_kernel(x, perm);
  if (autograd::any_needs_grad({x})) {
    auto node = std::make_shared<PermuteBackward>();
    node->inverse = inverse;
    out = autograd::attach(out, node, {x});
  }
  return trace::record("permute", {x}, out,
                       [perm](const std::vector<Tensor>& in) { return permute(in[0], perm); });
}

Tensor transpose(const Tensor& x, int64_t d0, int64_t d1) {
  detail::check_defined("transpose", x, "input");
  d0 = wrap_dim(d0, x.dim(), "transpose");
  d1 = wrap_dim(d1, x.dim(), "transpose");
  std::vector<int64_t> perm(x.dim());
  for (int64_t i = 0; i < x.dim(); ++i) perm[i] = i;
  std::swap(perm[d0], perm[d1]);
  return permute(x, perm);
}

// Tensor's methods that are these ops.

Tensor Tensor::reshape(Shape new_shape) const {
  return tensorplay::reshape(*this, std::move(new_shape));
}

Tensor Tensor::slice0(int64_t start, int64_t end) const {
  return tensorplay::slice0(*this, start, end);
}

Tensor Tensor::clone() const { return tensorplay::clone(*this); }

}  // namespace tensorplay
