// Size classes shared by the caching allocators (host and CUDA): a freed block is kept under its
// class and handed out again for any request of the same class. Internal to the tensors layer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <new>

namespace tensorplay {

/// Size class of a request: multiples of 512 B up to 1 MiB; above, four classes per power of two
/// (1, 1.25, 1.5, 1.75 MiB, 2, 2.5, ... MiB), so rounding wastes at most a quarter.
inline size_t size_class(size_t bytes) {
  constexpr size_t kGranule = 512;
  constexpr size_t kLargeThreshold = size_t{1} << 20;
  if (bytes == 0) return kGranule;
  if (bytes <= kLargeThreshold) return (bytes + kGranule - 1) / kGranule * kGranule;
  if (bytes > (SIZE_MAX >> 2)) throw std::bad_alloc();  // no memory has a quarter of size_t
  size_t power = kLargeThreshold;
  while (power <= bytes / 2) power *= 2;  // largest power of two <= bytes
  size_t step = power / 4;
  return (bytes + step - 1) / step * step;
}

}  // namespace tensorplay
