// rotary_embedding: one kernel that rotates each (c, c + D/2) pair of channels, run forward with
// the tables and backward as the adjoint (transposed) rotation.
#include "tensorplay/core/ops/rotary.h"

#include <stdexcept>
#include <string>

#include "tensorplay/core/autograd/node.h"
#include "tensorplay/core/ops/detail/op_support.h"
#include "tensorplay/core/ops/elementwise.h"
#include "tensorplay/core/ops/shape_ops.h"
#include "tensorplay/core/trace_hook.h"

namespace tensorplay {
namespace {

// How x's rows lie: [outer, time, inner] rows of dim; time_dim is the positions' dimension.
struct RotaryRows {
  int64_t outer = 0, time = 0, inner = 0, dim = 0, time_dim = 0;
};

struct RotaryBackward : autograd::Node {
  Tensor cos, sin;
  RotaryRows rows;
  const char* name() const override { return "RotaryBackward"; }
  std::vector<Tensor> apply(const Tensor& g, const std::vector<bool>& needed) override {
    std::vector<Tensor> out(needed.size());
    if (!needed[0]) return out;
    Tensor gx = empty(g.shape(), {.device = g.device()});
    detail::backend_of(g).rotary(g.data<float>(), cos.data<float>(), sin.data<float>(),
                                 gx.data<float>(), rows.outer, rows.time, rows.inner, rows.dim,
                                 /*transpose=*/true);
    out[0] = gx;
    return out;
  }
  void release() override {
    cos = Tensor();
    sin = Tensor();
  }
  std::vector<Tensor*> saved_tensors() override { return {&cos, &sin}; }
};

// x's rows for positions along `time_dim` (checked); throws naming the shapes when they do not fit.
RotaryRows check_args(const Tensor& x, const Tensor& cos, const Tensor& sin, int64_t time_dim) {
  detail::check_defined("rotary_embedding", x, "input");
  detail::check_defined("rotary_embedding", cos, "cos");
  detail::check_defined("rotary_embedding", sin, "sin");
  detail::check_same_device("rotary_embedding", x, cos);
  detail::check_same_device("rotary_embedding", x, sin);
  if (x.dim() < 2 || x.size(-1) % 2 != 0)
    throw std::invalid_argument("rotary_embedding: expected input [..., T, D] with D even, got " +
                                to_string(x.shape()));
  const int64_t t_dim = time_dim < 0 ? time_dim + x.dim() : time_dim;
  if (t_dim < 0 || t_dim >= x.dim() - 1)
    throw std::invalid_argument("rotary_embedding: the position dimension " +
                                std::to_string(time_dim) + " must come before the last one of " +
                                to_string(x.shape()));
  RotaryRows rows{numel_range(x.shape(), 0, t_dim), x.size(t_dim),
                  numel_range(x.shape(), t_dim + 1, x.dim() - 1), x.size(-1), t_dim};
  const Shape table = {rows.time, rows.dim};
  if (cos.shape() != table || sin.shape() != table)
    throw std::invalid_argument("rotary_embedding: tables cos " + to_string(cos.shape()) +
                                " and sin " + to_string(sin.shape()) + " must both be " +
                                to_string(table) + " for input " + to_string(x.shape()));
  if (autograd::any_needs_grad({cos, sin}))
    throw std::invalid_argument(
        "rotary_embedding: cos and sin are constant tables and must not require a gradient "
        "(detach them)");
  return rows;
}

// The composed form, for devices without the fused kernels: the tables broadcast over the
// dimensions between the positions and the channels.
Tensor composed(const Tensor& x, const Tensor& cos, const Tensor& sin, const RotaryRows& rows) {
  const int64_t last = x.dim() - 1, half = x.size(-1) / 2;
  Tensor rotated = cat({-narrow(x, last, half, half), narrow(x, last, 0, half)}, last);
  Shape table(static_cast<size_t>(x.dim() - rows.time_dim), 1);  // [T, 1, ..., 1, D]
  table.front() = rows.time;
  table.back() = rows.dim;
  return x * cos.reshape(table) + rotated * sin.reshape(table);
}

}  // namespace

Tensor rotary_embedding(const Tensor& x, const Tensor& cos, const Tensor& sin, int64_t time_dim) {
  const RotaryRows rows = check_args(x, cos, sin, time_dim);
  if (!x.device().is_cpu()) return composed(x, cos, sin, rows);
  if (detail::any_bfloat16({x, cos, sin}))
    return detail::in_float32({x, cos, sin}, x.dtype(), [time_dim](const std::vector<Tensor>& in) {
      return rotary_embedding(in[0], in[1], in[2], time_dim);
    });
  Tensor y = empty(x.shape(), {.device = x.device()});
  detail::backend_of(x).rotary(x.data<float>(), cos.data<float>(), sin.data<float>(),
                               y.data<float>(), rows.outer, rows.time, rows.inner, rows.dim,
                               /*transpose=*/false);
  std::vector<Tensor> inputs = {x, cos, sin};
  if (autograd::any_needs_grad({x})) {
    auto node = std::make_shared<RotaryBackward>();
    node->cos = cos.detach();
    node->sin = sin.detach();
    node->rows = rows;
    y = autograd::attach(y, node, inputs);
  }
  return trace::record("rotary_embedding", inputs, y, [time_dim](const std::vector<Tensor>& in) {
    return rotary_embedding(in[0], in[1], in[2], time_dim);
  });
}

}  // namespace tensorplay
