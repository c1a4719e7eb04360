// embedding: ids are checked on the host (they are small), then gathered by the device kernel;
// the weight gradient scatters rows back in id order, so it is deterministic.
#include "tensorplay/core/ops/embedding.h"

#include <cmath>
#include <stdexcept>
#include <string>

#include "tensorplay/core/autograd/node.h"
#include "tensorplay/core/ops/detail/op_support.h"
#include "tensorplay/core/trace_hook.h"

namespace tensorplay {
namespace {

struct EmbeddingBackward : autograd::Node {
  Tensor indices;
  int64_t n = 0, vocab = 0, dim = 0;
  const char* name() const override { return "EmbeddingBackward"; }
  std::vector<Tensor> apply(const Tensor& g, const std::vector<bool>& needed) override {
    std::vector<Tensor> out(2);
    if (needed[1]) {
      Tensor gw = empty({vocab, dim}, {.device = g.device()});
      detail::backend_of(g).embedding_backward(indices.data<float>(), g.data<float>(),
                                               gw.data<float>(), n, dim, vocab);
      out[1] = gw;
    }
    return out;
  }
  void release() override { indices = Tensor(); }
};

void check_ids(const Tensor& indices, int64_t vocab) {
  std::vector<float> ids = indices.to_vector();
  for (size_t i = 0; i < ids.size(); ++i) {
    float v = ids[i];
    if (!(v >= 0.0f) || v >= static_cast<float>(vocab) || std::floor(v) != v) {
      std::string shown = std::floor(v) == v && std::abs(v) < 9.2e18f
                              ? std::to_string(static_cast<int64_t>(v))
                              : std::to_string(v);
      throw std::invalid_argument("embedding: id " + shown + " at position " + std::to_string(i) +
                                  " is outside the vocabulary of size " + std::to_string(vocab) +
                                  " (ids must be integers in [0, " + std::to_string(vocab) + "))");
    }
  }
}

}  // namespace

Tensor embedding(const Tensor& indices, const Tensor& weight) {
  detail::check_defined("embedding", indices, "indices");
  detail::check_defined("embedding", weight, "weight");
  detail::check_same_device("embedding", indices, weight);
  detail::check_float32("embedding (indices)", indices);  // bfloat16 cannot count past 256
  if (weight.dtype() == DType::BFloat16)
    return detail::in_float32({indices, weight}, weight.dtype(), [](const std::vector<Tensor>& in) {
      return embedding(in[0], in[1]);
    });
  if (weight.dim() != 2)
    throw std::invalid_argument("embedding: weight must be [vocab, dim], got shape " +
                                to_string(weight.shape()));
  int64_t vocab = weight.shape()[0], dim = weight.shape()[1], n = indices.numel();
  check_ids(indices, vocab);
  Shape out_shape = indices.shape();
  out_shape.push_back(dim);
  Tensor out = empty(out_shape, {.device = weight.device()});
  if (n > 0 && dim > 0)
    detail::backend_of(weight).embedding(indices.data<float>(), weight.data<float>(),
                                         out.data<float>(), n, dim);
  if (autograd::any_needs_grad({weight})) {
    auto node = std::make_shared<EmbeddingBackward>();
    node->indices = indices.detach();
    node->n = n;
    node->vocab = vocab;
    node->dim = dim;
    // The indices get no gradient: attach only the weight's edge.
    out = autograd::attach(out, node, {indices.detach(), weight});
  }
  return trace::record("embedding", {indices, weight}, out,
                       [](const std::vector<Tensor>& in) { return embedding(in[0], in[1]); });
}

}  // namespace tensorplay
