// Tensor shapes: a list of dimension sizes, with the helpers every op needs (element counts,
// dimension wrapping, broadcasting) and a readable printed form.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tensorplay {

/// Sizes of a tensor's dimensions, outermost first.
using Shape = std::vector<int64_t>;

/// Product of the sizes (1 for a scalar).
int64_t numel(const Shape& shape);

/// "[8, 128]".
std::string to_string(const Shape& shape);

/// Turns a possibly negative dimension into 0..rank-1; throws naming the op when out of range.
int64_t wrap_dim(int64_t dim, int64_t rank, const char* op);

/// Shape both operands broadcast to (numpy rules); throws naming the op and both shapes.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);

/// Product of sizes in [begin, end).
int64_t numel_range(const Shape& shape, int64_t begin, int64_t end);

}  // namespace tensorplay
