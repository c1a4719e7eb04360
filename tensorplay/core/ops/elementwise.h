// Elementwise arithmetic with numpy broadcasting, tensor-scalar forms and the usual operators.
#pragma once

#include "tensorplay/core/tensor.h"

namespace tensorplay {

Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
/// x * alpha + beta.
Tensor affine(const Tensor& x, float alpha, float beta);
Tensor neg(const Tensor& x);

inline Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
inline Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
inline Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
inline Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
inline Tensor operator-(const Tensor& x) { return neg(x); }
inline Tensor operator+(const Tensor& a, float s) { return affine(a, 1.0f, s); }
inline Tensor operator-(const Tensor& a, float s) { return affine(a, 1.0f, -s); }
inline Tensor operator*(const Tensor& a, float s) { return affine(a, s, 0.0f); }
inline Tensor operator/(const Tensor& a, float s) { return affine(a, 1.0f / s, 0.0f); }
inline Tensor operator+(float s, const Tensor& a) { return affine(a, 1.0f, s); }
inline Tensor operator-(float s, const Tensor& a) { return affine(a, -1.0f, s); }
inline Tensor operator*(float s, const Tensor& a) { return affine(a, s, 0.0f); }

}  // namespace tensorplay
