// Vocabulary-parallel cross entropy: the row maxima and the sums of exponentials and target
// logits reduced across the group; the softmax kept for a backward with no communication.
#include "tensorplay/distributed/tensor_parallel/loss_parallel.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "tensorplay/core/autograd/node.h"
#include "tensorplay/distributed/tensor_parallel/detail/tp_collectives.h"

namespace tensorplay::distributed::tensor_parallel {
namespace {

// The backward: (softmax - one hot) * grad / rows counted, on this rank's columns.
struct VocabParallelCrossEntropyBackward : autograd::Node {
  std::vector<float> softmax;         // [N, C], this rank's columns
  std::vector<int64_t> local_target;  // per row: its target's local column, or -1
  std::vector<bool> counted;          // per row: not ignored
  float count = 0.0f;
  Shape shape;
  Device device;
  DType dtype = DType::Float32;
  const char* name() const override { return "VocabParallelCrossEntropyBackward"; }
  std::vector<Tensor> apply(const Tensor& grad, const std::vector<bool>&) override {
    const float g = count > 0.0f ? grad.item() / count : 0.0f;
    const int64_t rows = shape[0], cols = shape[1];
    std::vector<float> out(softmax.size(), 0.0f);
    for (int64_t i = 0; i < rows; ++i) {
      if (!counted[i]) continue;
      for (int64_t j = 0; j < cols; ++j) out[i * cols + j] = softmax[i * cols + j] * g;
      if (local_target[i] >= 0) out[i * cols + local_target[i]] -= g;
    }
    return {from_vector(out, shape).to(device).to(dtype)};
  }
};

void check_shapes(const Tensor& logits, const Tensor& targets) {
  if (logits.dim() != 2 || targets.dim() != 1 || targets.size(0) != logits.size(0))
    throw std::invalid_argument(
        "vocab_parallel_cross_entropy: expected local logits [N, C] and targets [N], got " +
        to_string(logits.shape()) + " and " + to_string(targets.shape()));
}

// The rows' maxima over the whole vocabulary.
std::vector<float> global_row_max(const std::vector<float>& l, int64_t rows, int64_t cols,
                                  const ProcessGroup& tp) {
  std::vector<float> local(rows, -std::numeric_limits<float>::infinity());
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) local[i] = std::max(local[i], l[i * cols + j]);
  const std::vector<float> all =
      detail::all_gather_dim(tp, from_vector(local, {rows, 1}), 1).to_vector();
  const int64_t n = tp.size();
  std::vector<float> out(rows);
  for (int64_t i = 0; i < rows; ++i)
    out[i] = *std::max_element(all.begin() + i * n, all.begin() + (i + 1) * n);
  return out;
}

}  // namespace

Tensor vocab_parallel_cross_entropy(const Tensor& local_logits, const Tensor& targets,
                                    const ProcessGroup& tp, int64_t ignore_index) {
  check_shapes(local_logits, targets);
  const int64_t rows = local_logits.size(0), cols = local_logits.size(1);
  const int64_t first = tp.rank() * cols, vocab = cols * tp.size();
  const std::vector<float> l = local_logits.detach().to(Device()).to(DType::Float32).to_vector();
  const std::vector<float> t = targets.detach().to(Device()).to_vector();
  auto node = std::make_shared<VocabParallelCrossEntropyBackward>();
  node->local_target.assign(rows, -1);
  node->counted.assign(rows, false);
  // One all-reduce carries both: the sums of exponentials, then the target logits.
  const std::vector<float> max = global_row_max(l, rows, cols, tp);
  std::vector<float> sums(2 * rows, 0.0f);
  node->softmax.resize(l.size());
  for (int64_t i = 0; i < rows; ++i) {
    const auto target = static_cast<int64_t>(t[i]);
    if (target != ignore_index && (target < 0 || target >= vocab))
      throw std::invalid_argument("vocab_parallel_cross_entropy: target " + std::to_string(target) +
                                  " of row " + std::to_string(i) + " is outside [0, " +
                                  std::to_string(vocab) + ")");
    node->counted[i] = target != ignore_index;
    for (int64_t j = 0; j < cols; ++j)
      sums[i] += node->softmax[i * cols + j] = std::exp(l[i * cols + j] - max[i]);
    if (node->counted[i] && target >= first && target < first + cols) {
      node->local_target[i] = target - first;
      sums[rows + i] = l[i * cols + target - first];
    }
  }
  const std::vector<float> total =
      detail::all_reduce_sum(tp, from_vector(sums, {2 * rows})).to_vector();
  double loss = 0.0;
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < cols; ++j) node->softmax[i * cols + j] /= total[i];
    if (!node->counted[i]) continue;
    loss += std::log(total[i]) + max[i] - total[rows + i];
    node->count += 1.0f;
  }
  const float mean = node->count > 0.0f ? static_cast<float>(loss / node->count) : 0.0f;
  node->shape = local_logits.shape();
  node->device = local_logits.device();
  node->dtype = local_logits.dtype();
  Tensor out = from_vector({mean}, {}).to(local_logits.device());
  return autograd::attach(out, node, {local_logits});
}

}  // namespace tensorplay::distributed::tensor_parallel
