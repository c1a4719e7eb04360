// Tensor shapes: a list of dimension sizes, with the helpers every op needs (element counts,
// dimension wrapping, broadcasting, overflow-checked size arithmetic) and a readable printed form.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace tensorplay {

/// Sizes of a tensor's dimensions, outermost first.
using Shape = std::vector<int64_t>;

/// Product of the sizes (1 for a scalar); throws std::invalid_argument when it overflows int64.
int64_t numel(const Shape& shape);

/// "[8, 128]".
std::string to_string(const Shape& shape);

/// Turns a possibly negative dimension into 0..rank-1; throws naming the op when out of range.
int64_t wrap_dim(int64_t dim, int64_t rank, const char* op);

/// Shape both operands broadcast to (numpy rules); throws naming the op and both shapes.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);

/// Product of sizes in [begin, end); throws std::invalid_argument when it overflows int64.
int64_t numel_range(const Shape& shape, int64_t begin, int64_t end);

/// Checks that `shape` can hold a tensor of `element_size`-byte elements: every size >= 0 and
/// both the element count and the byte count fit in int64. Returns the element count; throws
/// std::invalid_argument naming `op`, the shape and the fix otherwise.
int64_t check_shape(const Shape& shape, size_t element_size, const char* op);

/// a * b for sizes; throws std::invalid_argument naming `what` when the product overflows int64.
int64_t checked_mul(int64_t a, int64_t b, const char* what);
/// a + b for sizes and offsets; throws std::invalid_argument naming `what` on overflow.
int64_t checked_add(int64_t a, int64_t b, const char* what);

}  // namespace tensorplay
