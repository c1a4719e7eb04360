// Elementwise CUDA kernels: fill, dtype conversion, affine, broadcasting binary ops, unary ops and
// their derivatives. Grid-stride loops over 64-bit indices; mirrors
// tensorplay/cpu_kernels/cpu_backend.cpp.
#include <cmath>
#include <stdexcept>

#include "tensorplay/cuda/cuda_check.h"
#include "tensorplay/cuda/cuda_device.h"
#include "tensorplay/cuda/cuda_kernels.h"
#include "tensorplay/cuda/cuda_math.cuh"

namespace tensorplay::cuda {
namespace {

constexpr int kMaxRank = 8;

/// Shape and strides passed by value, so no host pointer reaches the device.
struct BroadcastLayout {
  int64_t shape[kMaxRank];
  int64_t a_strides[kMaxRank];
  int64_t b_strides[kMaxRank];
  int rank;
};

#define TP_GRID_STRIDE_LOOP(i, n)                                                        \
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < (n); \
       i += static_cast<int64_t>(blockDim.x) * gridDim.x)

__global__ void fill_kernel(float* dst, int64_t n, float value) {
  TP_GRID_STRIDE_LOOP(i, n) dst[i] = value;
}

__global__ void float_to_bfloat16_kernel(const float* src, uint16_t* dst, int64_t n) {
  TP_GRID_STRIDE_LOOP(i, n) dst[i] = to_bfloat16(src[i]);
}

__global__ void bfloat16_to_float_kernel(const uint16_t* src, float* dst, int64_t n) {
  TP_GRID_STRIDE_LOOP(i, n) dst[i] = from_bfloat16(src[i]);
}

__global__ void affine_kernel(const float* x, float* out, int64_t n, float alpha, float beta) {
  TP_GRID_STRIDE_LOOP(i, n) out[i] = x[i] * alpha + beta;
}

/// Both operands laid out like the output (the common case: same shapes).
template <BinaryOp Op>
__global__ void binary_contiguous_kernel(const float* a, const float* b, float* out, int64_t n) {
  TP_GRID_STRIDE_LOOP(i, n) out[i] = binary_op<Op>(a[i], b[i]);
}

/// General broadcasting: decompose the output index into coordinates, dot with each stride set.
template <BinaryOp Op>
__global__ void binary_broadcast_kernel(const float* a, const float* b, float* out, int64_t n,
                                        BroadcastLayout layout) {
  TP_GRID_STRIDE_LOOP(i, n) {
    int64_t rest = i, ia = 0, ib = 0;
    for (int d = layout.rank - 1; d >= 0; --d) {
      int64_t coordinate = rest % layout.shape[d];
      rest /= layout.shape[d];
      ia += coordinate * layout.a_strides[d];
      ib += coordinate * layout.b_strides[d];
    }
    out[i] = binary_op<Op>(a[ia], b[ib]);
  }
}

template <UnaryOp Op>
__global__ void unary_kernel(const float* x, float* y, int64_t n) {
  TP_GRID_STRIDE_LOOP(i, n) y[i] = unary_op<Op>(x[i]);
}

/// Reads only the operands the derivative needs (callers may pass null for the others).
template <UnaryOp Op>
__global__ void unary_backward_kernel(const float* x, const float* y, const float* gy, float* gx,
                                      int64_t n) {
  constexpr bool kReadsY = unary_grad_reads_output(Op);
  constexpr bool kReadsX = !kReadsY && Op != UnaryOp::Neg;
  TP_GRID_STRIDE_LOOP(i, n) {
    float xv = kReadsX ? x[i] : 0.0f;
    float yv = kReadsY ? y[i] : 0.0f;
    gx[i] = unary_grad<Op>(xv, yv, gy[i]);
  }
}

template <BinaryOp Op>
void launch_binary_op(const float* a, const float* b, float* out, int64_t n, bool contiguous,
                      const BroadcastLayout& layout, cudaStream_t stream) {
  if (contiguous) {
    binary_contiguous_kernel<Op><<<grid_for(n), kBlockSize, 0, stream>>>(a, b, out, n);
  } else {
    binary_broadcast_kernel<Op><<<grid_for(n), kBlockSize, 0, stream>>>(a, b, out, n, layout);
  }
}

template <UnaryOp Op>
void launch_unary_op(const float* x, float* y, int64_t n, cudaStream_t stream) {
  unary_kernel<Op><<<grid_for(n), kBlockSize, 0, stream>>>(x, y, n);
}

template <UnaryOp Op>
void launch_unary_backward_op(const float* x, const float* y, const float* gy, float* gx, int64_t n,
                              cudaStream_t stream) {
  unary_backward_kernel<Op><<<grid_for(n), kBlockSize, 0, stream>>>(x, y, gy, gx, n);
}

}  // namespace

void launch_fill(float* dst, int64_t n, float value, cudaStream_t stream) {
  if (n <= 0) return;
  if (value == 0.0f && !std::signbit(value)) {
    TP_CUDA_CHECK(cudaMemsetAsync(dst, 0, static_cast<size_t>(n) * sizeof(float), stream));
    return;
  }
  fill_kernel<<<grid_for(n), kBlockSize, 0, stream>>>(dst, n, value);
  TP_CUDA_CHECK_LAUNCH();
}

void launch_float_to_bfloat16(const float* src, uint16_t* dst, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  float_to_bfloat16_kernel<<<grid_for(n), kBlockSize, 0, stream>>>(src, dst, n);
  TP_CUDA_CHECK_LAUNCH();
}

void launch_bfloat16_to_float(const uint16_t* src, float* dst, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  bfloat16_to_float_kernel<<<grid_for(n), kBlockSize, 0, stream>>>(src, dst, n);
  TP_CUDA_CHECK_LAUNCH();
}

void launch_affine(const float* x, float* out, int64_t n, float alpha, float beta,
                   cudaStream_t stream) {
  if (n <= 0) return;
  affine_kernel<<<grid_for(n), kBlockSize, 0, stream>>>(x, out, n, alpha, beta);
  TP_CUDA_CHECK_LAUNCH();
}

void launch_binary(BinaryOp op, const float* a, const int64_t* a_strides, const float* b,
                   const int64_t* b_strides, float* out, const int64_t* shape, int rank,
                   cudaStream_t stream) {
  if (rank > kMaxRank) throw std::invalid_argument("elementwise ops support at most 8 dimensions");
  BroadcastLayout layout{};
  layout.rank = rank;
  int64_t n = 1;
  bool contiguous = true;
  for (int d = rank - 1; d >= 0; --d) {
    layout.shape[d] = shape[d];
    layout.a_strides[d] = a_strides[d];
    layout.b_strides[d] = b_strides[d];
    if (shape[d] != 1) contiguous = contiguous && a_strides[d] == n && b_strides[d] == n;
    n *= shape[d];
  }
  if (n <= 0) return;
  switch (op) {
    case BinaryOp::Add:
      launch_binary_op<BinaryOp::Add>(a, b, out, n, contiguous, layout, stream);
      break;
    case BinaryOp::Sub:
      launch_binary_op<BinaryOp::Sub>(a, b, out, n, contiguous, layout, stream);
      break;
    case BinaryOp::Mul:
      launch_binary_op<BinaryOp::Mul>(a, b, out, n, contiguous, layout, stream);
      break;
    case BinaryOp::Div:
      launch_binary_op<BinaryOp::Div>(a, b, out, n, contiguous, layout, stream);
      break;
  }
  TP_CUDA_CHECK_LAUNCH();
}

#define TP_UNARY_CASES(LAUNCH, ...)          \
  switch (op) {                              \
    case UnaryOp::Relu:                      \
      LAUNCH<UnaryOp::Relu>(__VA_ARGS__);    \
      break;                                 \
    case UnaryOp::Gelu:                      \
      LAUNCH<UnaryOp::Gelu>(__VA_ARGS__);    \
      break;                                 \
    case UnaryOp::Tanh:                      \
      LAUNCH<UnaryOp::Tanh>(__VA_ARGS__);    \
      break;                                 \
    case UnaryOp::Exp:                       \
      LAUNCH<UnaryOp::Exp>(__VA_ARGS__);     \
      break;                                 \
    case UnaryOp::Log:                       \
      LAUNCH<UnaryOp::Log>(__VA_ARGS__);     \
      break;                                 \
    case UnaryOp::Neg:                       \
      LAUNCH<UnaryOp::Neg>(__VA_ARGS__);     \
      break;                                 \
    case UnaryOp::Sqrt:                      \
      LAUNCH<UnaryOp::Sqrt>(__VA_ARGS__);    \
      break;                                 \
    case UnaryOp::Square:                    \
      LAUNCH<UnaryOp::Square>(__VA_ARGS__);  \
      break;                                 \
    case UnaryOp::Sigmoid:                   \
      LAUNCH<UnaryOp::Sigmoid>(__VA_ARGS__); \
      break;                                 \
  }

void launch_unary(UnaryOp op, const float* x, float* y, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  TP_UNARY_CASES(launch_unary_op, x, y, n, stream)
  TP_CUDA_CHECK_LAUNCH();
}

void launch_unary_backward(UnaryOp op, const float* x, const float* y, const float* gy, float* gx,
                           int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  TP_UNARY_CASES(launch_unary_backward_op, x, y, gy, gx, n, stream)
  TP_CUDA_CHECK_LAUNCH();
}

}  // namespace tensorplay::cuda
