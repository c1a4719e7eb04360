// Checksums of checkpoint bytes (checkpoint_io.h), in a file of their own so that tools and the
// index fuzzer link them without the rest of the checkpoint code.
#include <bit>
#include <cstring>

#include "tensorplay/core/detail/fnv1a.h"
#include "tensorplay/pipelining/checkpoints/checkpoint_io.h"

namespace tensorplay::pipelining::checkpoint_io {

uint64_t fnv1a64(const std::string& bytes) { return detail::fnv1a64(bytes); }

namespace {

uint64_t load_little_endian(const unsigned char* p) {
  uint64_t word;
  std::memcpy(&word, p, sizeof(word));
  if constexpr (std::endian::native == std::endian::big) word = __builtin_bswap64(word);
  return word;
}

uint64_t mix(uint64_t h, uint64_t word) {
  h = detail::fnv1a64_mix(h, word);
  return h ^ (h >> 29);
}

}  // namespace

uint64_t word_checksum(const void* data, size_t bytes) {
  // Four independent lanes over 32-byte blocks, so the multiplications overlap; then the rest.
  const auto* p = static_cast<const unsigned char*>(data);
  uint64_t lanes[4] = {detail::kFnvOffsetBasis ^ bytes, 0x84222325cbf29ce4ull,
                       0x9e3779b97f4a7c15ull, 0xc2b2ae3d27d4eb4full};
  size_t i = 0;
  for (; i + 32 <= bytes; i += 32)
    for (int k = 0; k < 4; ++k) lanes[k] = mix(lanes[k], load_little_endian(p + i + 8 * k));
  for (; i + 8 <= bytes; i += 8) lanes[0] = mix(lanes[0], load_little_endian(p + i));
  for (; i < bytes; ++i) lanes[1] = mix(lanes[1], p[i]);
  uint64_t h = lanes[0];
  for (int k = 1; k < 4; ++k) h = mix(h, lanes[k]);
  return h;
}

}  // namespace tensorplay::pipelining::checkpoint_io
