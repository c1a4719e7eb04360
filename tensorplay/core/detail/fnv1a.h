// FNV-1a over 64 bits: the one hash behind the project's digests, checksums and keys (stable across
// processes, hosts and builds; a guard against accidents, not against a hostile sender).
#pragma once

#include <cstdint>
#include <string_view>

namespace tensorplay::detail {

inline constexpr uint64_t kFnvOffsetBasis = 0xcbf29ce484222325ull;
inline constexpr uint64_t kFnvPrime = 0x100000001b3ull;

/// FNV-1a of `bytes`, continuing from `h` (the offset basis starts a hash).
constexpr uint64_t fnv1a64(std::string_view bytes, uint64_t h = kFnvOffsetBasis) {
  for (char c : bytes) h = (h ^ static_cast<unsigned char>(c)) * kFnvPrime;
  return h;
}

/// Folds one whole number into `h` the way FNV-1a folds a byte: for hashing a sequence of
/// numbers (ranks, sizes) without spelling out their bytes.
constexpr uint64_t fnv1a64_mix(uint64_t h, uint64_t value) { return (h ^ value) * kFnvPrime; }

}  // namespace tensorplay::detail
