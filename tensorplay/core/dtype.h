// Element types a Tensor can hold: float32 and bfloat16 on every device. bfloat16 ops compute in
// float32 and round each result once; products accumulate in float32.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>
#include <string>

namespace tensorplay {

/// Element type of a tensor.
enum class DType : uint8_t { Float32, BFloat16 };

/// Bytes per element.
constexpr size_t element_size(DType dtype) { return dtype == DType::Float32 ? 4 : 2; }

/// "float32" or "bfloat16".
std::string to_string(DType dtype);

/// Rounds a float to bfloat16 (round to nearest even, NaN kept quiet).
inline uint16_t float_to_bfloat16(float value) {
  uint32_t bits = std::bit_cast<uint32_t>(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40u);
  uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

/// Widens a bfloat16 to float (exact).
inline float bfloat16_to_float(uint16_t value) {
  return std::bit_cast<float>(static_cast<uint32_t>(value) << 16);
}

}  // namespace tensorplay
