// Shape helpers: element counts (overflow-checked), dimension wrapping, broadcasting.
#include "tensorplay/core/shape.h"

#include <algorithm>
#include <stdexcept>

namespace tensorplay {
namespace {

[[noreturn]] void throw_too_large(const Shape& shape, const char* what) {
  throw std::invalid_argument(std::string(what) + ": shape " + to_string(shape) +
                              " has more elements than int64 can count; check the sizes (a size "
                              "computed from an overflowed or uninitialised value?)");
}

}  // namespace

int64_t checked_mul(int64_t a, int64_t b, const char* what) {
  int64_t out;
  if (__builtin_mul_overflow(a, b, &out))
    throw std::invalid_argument(std::string(what) + ": " + std::to_string(a) + " * " +
                                std::to_string(b) + " overflows int64; check the sizes");
  return out;
}

int64_t checked_add(int64_t a, int64_t b, const char* what) {
  int64_t out;
  if (__builtin_add_overflow(a, b, &out))
    throw std::invalid_argument(std::string(what) + ": " + std::to_string(a) + " + " +
                                std::to_string(b) + " overflows int64; check the sizes");
  return out;
}

int64_t numel(const Shape& shape) {
  int64_t n = 1;
  for (int64_t s : shape)
    if (__builtin_mul_overflow(n, s, &n)) throw_too_large(shape, "numel");
  return n;
}

int64_t numel_range(const Shape& shape, int64_t begin, int64_t end) {
  int64_t n = 1;
  for (int64_t i = begin; i < end; ++i)
    if (__builtin_mul_overflow(n, shape[i], &n)) throw_too_large(shape, "numel");
  return n;
}

int64_t check_shape(const Shape& shape, size_t element_size, const char* op) {
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] < 0)
      throw std::invalid_argument(std::string(op) + ": size " + std::to_string(shape[i]) +
                                  " of dimension " + std::to_string(i) + " in shape " +
                                  to_string(shape) + " is negative; sizes must be >= 0");
  }
  int64_t n = 1;
  for (int64_t s : shape)
    if (__builtin_mul_overflow(n, s, &n)) throw_too_large(shape, op);
  int64_t bytes;
  if (__builtin_mul_overflow(n, static_cast<int64_t>(element_size), &bytes))
    throw std::invalid_argument(std::string(op) + ": shape " + to_string(shape) + " holds " +
                                std::to_string(n) + " elements of " + std::to_string(element_size) +
                                " bytes, more bytes than int64 can count; check the sizes");
  return n;
}

std::string to_string(const Shape& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

int64_t wrap_dim(int64_t dim, int64_t rank, const char* op) {
  int64_t wrapped = dim < 0 ? dim + rank : dim;
  if (wrapped < 0 || wrapped >= std::max<int64_t>(rank, 1)) {
    throw std::invalid_argument(std::string(op) + ": dimension " + std::to_string(dim) +
                                " is out of range for a tensor of rank " + std::to_string(rank));
  }
  return wrapped;
}

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  size_t rank = std::max(a.size(), b.size());
  Shape out(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1) {
      throw std::invalid_argument(std::string(op) + ": shapes " + to_string(a) + " and " +
                                  to_string(b) + " do not broadcast");
    }
    out[i] = da == 1 ? db : da;
  }
  return out;
}

}  // namespace tensorplay
