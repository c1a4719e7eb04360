// Device-side scalar math shared by the CUDA kernels, written to mirror the CPU formulas
// (tensorplay/cpu_kernels/cpu_backend.cpp) so both backends agree within float rounding. Internal.
#pragma once

#include <cstdint>

#include "tensorplay/core/backend.h"

namespace tensorplay::cuda {

constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kGeluCoeff = 0.044715f;

/// Round to nearest even, NaN kept quiet: bit for bit the host's float_to_bfloat16.
__device__ __forceinline__ uint16_t to_bfloat16(float value) {
  uint32_t bits = __float_as_uint(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40u);
  uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

__device__ __forceinline__ float from_bfloat16(uint16_t value) {
  return __uint_as_float(static_cast<uint32_t>(value) << 16);
}

template <BinaryOp Op>
__device__ __forceinline__ float binary_op(float x, float y) {
  if constexpr (Op == BinaryOp::Add) return x + y;
  if constexpr (Op == BinaryOp::Sub) return x - y;
  if constexpr (Op == BinaryOp::Mul) return x * y;
  if constexpr (Op == BinaryOp::Div) return x / y;
}

template <UnaryOp Op>
__device__ __forceinline__ float unary_op(float v) {
  if constexpr (Op == UnaryOp::Relu) return v <= 0.0f ? 0.0f : v;  // NaN passes, as in PyTorch
  if constexpr (Op == UnaryOp::Gelu)
    return 0.5f * v * (1.0f + tanhf(kSqrt2OverPi * (v + kGeluCoeff * v * v * v)));
  if constexpr (Op == UnaryOp::Tanh) return tanhf(v);
  if constexpr (Op == UnaryOp::Exp) return expf(v);
  if constexpr (Op == UnaryOp::Log) return logf(v);
  if constexpr (Op == UnaryOp::Neg) return -v;
  if constexpr (Op == UnaryOp::Sqrt) return sqrtf(v);
  if constexpr (Op == UnaryOp::Square) return v * v;
  if constexpr (Op == UnaryOp::Sigmoid) return 1.0f / (1.0f + expf(-v));
}

/// gx for one element; x is the input, y = f(x), gy the incoming gradient.
template <UnaryOp Op>
__device__ __forceinline__ float unary_grad(float x, float y, float gy) {
  if constexpr (Op == UnaryOp::Relu) return x <= 0.0f ? 0.0f : gy;
  if constexpr (Op == UnaryOp::Gelu) {
    float inner = kSqrt2OverPi * (x + kGeluCoeff * x * x * x);
    float t = tanhf(inner);
    float dinner = kSqrt2OverPi * (1.0f + 3.0f * kGeluCoeff * x * x);
    return gy * (0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * dinner);
  }
  if constexpr (Op == UnaryOp::Tanh) return gy * (1.0f - y * y);
  if constexpr (Op == UnaryOp::Exp) return gy * y;
  if constexpr (Op == UnaryOp::Log) return gy / x;
  if constexpr (Op == UnaryOp::Neg) return -gy;
  if constexpr (Op == UnaryOp::Sqrt) return gy * 0.5f / y;
  if constexpr (Op == UnaryOp::Square) return gy * 2.0f * x;
  if constexpr (Op == UnaryOp::Sigmoid) return gy * y * (1.0f - y);
}

}  // namespace tensorplay::cuda
