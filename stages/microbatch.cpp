// Splitting inputs into microbatches and merging outputs.
#include "stages/microbatch.h"

#include <stdexcept>
#include <string>

#include "tensors/ops/shape_ops.h"

namespace tensorplay::pipelining {

std::vector<std::vector<Tensor>> split_into_microbatches(const std::vector<Tensor>& args, int n,
                                                         const std::vector<TensorChunkSpec>& specs,
                                                         bool allow_uneven) {
  if (n < 1)
    throw std::invalid_argument("the number of microbatches must be at least 1, got " +
                                std::to_string(n));
  if (!specs.empty() && specs.size() != args.size())
    throw std::invalid_argument("got " + std::to_string(specs.size()) + " chunk specs for " +
                                std::to_string(args.size()) + " inputs");
  std::vector<std::vector<Tensor>> out(n);
  for (size_t i = 0; i < args.size(); ++i) {
    const Tensor& t = args[i];
    if (!t.defined()) throw std::invalid_argument("input " + std::to_string(i) + " is undefined");
    int64_t dim = specs.empty() ? 0 : specs[i].dim;
    if (t.dim() == 0)
      throw std::invalid_argument("input " + std::to_string(i) +
                                  " is a scalar: it has no dimension to split into microbatches");
    dim = wrap_dim(dim, t.dim(), "split_into_microbatches");
    int64_t size = t.shape()[dim];
    if (size < n)
      throw std::invalid_argument("input " + std::to_string(i) + " has size " +
                                  std::to_string(size) + " along dim " + std::to_string(dim) +
                                  ", fewer than the " + std::to_string(n) + " microbatches");
    if (!allow_uneven && size % n != 0)
      throw std::invalid_argument("input " + std::to_string(i) + " has size " +
                                  std::to_string(size) + " along dim " + std::to_string(dim) +
                                  ", not divisible into " + std::to_string(n) +
                                  " microbatches: use a batch size that is a multiple of " +
                                  std::to_string(n));
    // As torch.tensor_split: the first size % n chunks get one extra element.
    int64_t base = size / n, extra = size % n, start = 0;
    for (int mb = 0; mb < n; ++mb) {
      int64_t len = base + (mb < extra ? 1 : 0);
      out[mb].push_back(dim == 0 ? t.slice0(start, start + len) : narrow(t, dim, start, len));
      start += len;
    }
  }
  return out;
}

Tensor merge_chunks(const std::vector<Tensor>& chunks, int64_t dim) { return cat(chunks, dim); }

}  // namespace tensorplay::pipelining
