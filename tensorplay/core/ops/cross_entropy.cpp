// cross_entropy: log_softmax of each row, the negative log-probability of its target, reduced;
// one node whose backward is (softmax - onehot) times each row's share of the output gradient.
// The backward keeps the logits, not the log-probabilities, and recomputes the latter (the same
// kernel on the same input, so the same bits): a bfloat16 model then keeps its [N, vocab] logits
// at two bytes an element, where float32 log-probabilities would take four.
#include <cmath>
#include <stdexcept>
#include <string>

#include "tensorplay/core/autograd/node.h"
#include "tensorplay/core/ops/detail/op_support.h"
#include "tensorplay/core/ops/loss.h"
#include "tensorplay/core/trace_hook.h"

namespace tensorplay {
namespace {

struct CrossEntropyBackward : autograd::Node {
  Tensor logits, targets;
  int64_t rows = 0, classes = 0, ignore_index = -100;
  Reduction reduction = Reduction::Mean;
  float scale = 1.0f;  // 1 / (number of counted rows) for Mean
  const char* name() const override { return "CrossEntropyBackward"; }
  std::vector<Tensor> apply(const Tensor& g, const std::vector<bool>& needed) override {
    std::vector<Tensor> out(2);
    if (!needed[0]) return out;
    Tensor grad_rows = g;
    if (reduction != Reduction::None)
      grad_rows = detail::binary_kernel(BinaryOp::Mul, full({rows}, scale, {.device = g.device()}),
                                        g, "cross_entropy_backward");
    const Backend& be = detail::backend_of(g);
    Tensor gx = empty(logits.shape(), {.device = g.device()});
    if (rows > 0) {
      be.softmax(logits.data<float>(), gx.data<float>(), rows, classes, 1, true);  // log p
      be.cross_entropy_backward(gx.data<float>(), targets.data<float>(), grad_rows.data<float>(),
                                gx.data<float>(), rows, classes, ignore_index);
    }
    out[0] = gx;
    return out;
  }
  void release() override {
    logits = Tensor();
    targets = Tensor();
  }
  std::vector<Tensor*> saved_tensors() override { return {&logits, &targets}; }
};

// Checks every target on the host; returns how many rows are not ignored.
int64_t count_targets(const Tensor& targets, int64_t classes, int64_t ignore_index) {
  std::vector<float> t = targets.to_vector();
  int64_t counted = 0;
  for (size_t i = 0; i < t.size(); ++i) {
    float v = t[i];
    // The range check keeps the cast defined (NaN, infinities and huge values are not ids).
    if (std::floor(v) == v && std::abs(v) < 9.2e18f && static_cast<int64_t>(v) == ignore_index)
      continue;
    if (!(v >= 0.0f) || v >= static_cast<float>(classes) || std::floor(v) != v)
      throw std::invalid_argument("cross_entropy: target " + std::to_string(v) + " at row " +
                                  std::to_string(i) + " is not a class id in [0, " +
                                  std::to_string(classes) + ") nor ignore_index " +
                                  std::to_string(ignore_index));
    ++counted;
  }
  return counted;
}

}  // namespace

Tensor cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index,
                     Reduction reduction) {
  detail::check_defined("cross_entropy", logits, "logits");
  detail::check_defined("cross_entropy", targets, "targets");
  detail::check_same_device("cross_entropy", logits, targets);
  detail::check_float32("cross_entropy (targets)", targets);  // bfloat16 cannot count past 256
  if (logits.dtype() == DType::BFloat16)
    return detail::in_float32({logits, targets}, logits.dtype(),
                              [ignore_index, reduction](const std::vector<Tensor>& in) {
                                return cross_entropy(in[0], in[1], ignore_index, reduction);
                              });
  if (logits.dim() != 2 || targets.dim() != 1 || targets.shape()[0] != logits.shape()[0])
    throw std::invalid_argument("cross_entropy: expected logits [N, C] and targets [N], got " +
                                to_string(logits.shape()) + " and " + to_string(targets.shape()));
  int64_t rows = logits.shape()[0], classes = logits.shape()[1];
  if (classes == 0) throw std::invalid_argument("cross_entropy: logits have no classes");
  int64_t counted = count_targets(targets, classes, ignore_index);
  const Backend& be = detail::backend_of(logits);
  Tensor logp = empty(logits.shape(), {.device = logits.device()});
  Tensor loss_rows = empty({rows}, {.device = logits.device()});
  if (rows > 0) {
    be.softmax(logits.data<float>(), logp.data<float>(), rows, classes, 1, true);
    be.nll_rows(logp.data<float>(), targets.data<float>(), loss_rows.data<float>(), rows, classes,
                ignore_index);
  }
  float scale = 1.0f;
  Tensor out = loss_rows;
  if (reduction != Reduction::None) {
    out = empty({}, {.device = logits.device()});
    be.sum_dim(loss_rows.data<float>(), out.data<float>(), 1, rows, 1);
    if (reduction == Reduction::Mean) {
      scale = counted > 0 ? 1.0f / static_cast<float>(counted) : 0.0f;
      out = detail::affine_kernel(out, scale, 0.0f);
    }
  }
  if (autograd::any_needs_grad({logits})) {
    auto node = std::make_shared<CrossEntropyBackward>();
    node->logits = logits.detach();
    node->targets = targets.detach();
    node->rows = rows;
    node->classes = classes;
    node->ignore_index = ignore_index;
    node->reduction = reduction;
    node->scale = scale;
    out = autograd::attach(out, node, {logits, targets.detach()});
  }
  return trace::record("cross_entropy", {logits, targets}, out,
                       [ignore_index, reduction](const std::vector<Tensor>& in) {
                         return cross_entropy(in[0], in[1], ignore_index, reduction);
                       });
}

}  // namespace tensorplay
