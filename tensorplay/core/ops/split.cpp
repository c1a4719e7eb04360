// split, chunk and tensor_split: piece boundaries computed here, each piece made by narrow (so it
// has narrow's gradient and is traced as a narrow).
#include "tensorplay/core/ops/split.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "tensorplay/core/ops/detail/op_support.h"
#include "tensorplay/core/ops/shape_ops.h"

namespace tensorplay {
namespace {

int64_t dim_size(const Tensor& x, int64_t& dim, const char* op) {
  detail::check_defined(op, x, "input");
  if (x.dim() == 0)
    throw std::invalid_argument(std::string(op) + ": cannot split a scalar (rank-0) tensor");
  dim = wrap_dim(dim, x.dim(), op);
  return x.shape()[dim];
}

std::vector<Tensor> pieces_at(const Tensor& x, int64_t dim, const std::vector<int64_t>& starts,
                              int64_t size) {
  std::vector<Tensor> out;
  for (size_t i = 0; i < starts.size(); ++i) {
    int64_t end = i + 1 < starts.size() ? starts[i + 1] : size;
    out.push_back(narrow(x, dim, starts[i], end - starts[i]));
  }
  return out;
}

}  // namespace

std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim) {
  int64_t size = dim_size(x, dim, "split");
  if (split_size <= 0)
    throw std::invalid_argument("split: split_size must be positive, got " +
                                std::to_string(split_size));
  std::vector<int64_t> starts;
  for (int64_t s = 0; s<size; s = split_size> size - s ? size : s + split_size) starts.push_back(s);
  if (starts.empty()) starts.push_back(0);
  return pieces_at(x, dim, starts, size);
}

std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& sizes, int64_t dim) {
  int64_t size = dim_size(x, dim, "split");
  std::vector<int64_t> starts;
  int64_t total = 0;
  for (int64_t s : sizes) {
    if (s < 0) throw std::invalid_argument("split: negative piece size " + std::to_string(s));
    starts.push_back(total);
    total = checked_add(total, s, "split");
  }
  if (total != size)
    throw std::invalid_argument("split: sizes add up to " + std::to_string(total) +
                                " but dimension " + std::to_string(dim) + " of shape " +
                                to_string(x.shape()) + " has " + std::to_string(size));
  return pieces_at(x, dim, starts, size);
}

std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim) {
  if (chunks <= 0)
    throw std::invalid_argument("chunk: number of chunks must be positive, got " +
                                std::to_string(chunks));
  int64_t size = dim_size(x, dim, "chunk");
  int64_t piece = std::max<int64_t>(size / chunks + (size % chunks != 0 ? 1 : 0), 1);
  return split(x, piece, dim);
}

std::vector<Tensor> tensor_split(const Tensor& x, int64_t sections, int64_t dim) {
  if (sections <= 0)
    throw std::invalid_argument("tensor_split: number of sections must be positive, got " +
                                std::to_string(sections));
  int64_t size = dim_size(x, dim, "tensor_split");
  std::vector<int64_t> starts;
  int64_t base = size / sections, extra = size % sections, s = 0;
  for (int64_t i = 0; i < sections; ++i) {
    starts.push_back(s);
    s += base + (i < extra ? 1 : 0);
  }
  return pieces_at(x, dim, starts, size);
}

std::vector<Tensor> tensor_split(const Tensor& x, const std::vector<int64_t>& indices,
                                 int64_t dim) {
  int64_t size = dim_size(x, dim, "tensor_split");
  std::vector<int64_t> starts = {0};
  for (int64_t i : indices) {
    // As in PyTorch: indices are clamped to the size, and a decreasing index gives an empty piece.
    int64_t c = std::clamp<int64_t>(i < 0 ? i + size : i, 0, size);
    starts.push_back(std::max(c, starts.back()));
  }
  return pieces_at(x, dim, starts, size);
}

}  // namespace tensorplay
