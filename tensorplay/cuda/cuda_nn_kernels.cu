// CUDA kernels of the neural-network ops: layout copies, softmax (plain, log, causal), layer norm,
// embedding and cross entropy. Mirrors tensorplay/cpu_kernels/nn_kernels.cpp. Row kernels give one
// block to a row and reduce with cuda_reduce.cuh; column sums split the rows into fixed chunks (one
// thread per chunk and column, then one per column over the chunks in order); the embedding
// gradient sorts the ids (stably) and gives one thread to each (id, column). No atomics anywhere,
// so every result is deterministic (the split backward relies on it: I then W must equal the full
// backward bit for bit).
#include <cmath>
#include <cub/device/device_radix_sort.cuh>
#include <stdexcept>

#include "tensorplay/cuda/cuda_allocator.h"
#include "tensorplay/cuda/cuda_check.h"
#include "tensorplay/cuda/cuda_device.h"
#include "tensorplay/cuda/cuda_nn_kernels.h"
#include "tensorplay/cuda/cuda_reduce.cuh"

namespace tensorplay::cuda {
namespace {

constexpr int kRowThreads = 256;
constexpr int kMaxRank = 8;

unsigned row_grid(int64_t rows) {
  return static_cast<unsigned>(rows < 65535LL * 8 ? (rows < 1 ? 1 : rows) : 65535LL * 8);
}

#define TP_FOR_EACH_ROW(row, rows) for (int64_t row = blockIdx.x; row < (rows); row += gridDim.x)
#define TP_FOR_EACH_THREAD(i, n)                                                         \
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < (n); \
       i += static_cast<int64_t>(blockDim.x) * gridDim.x)

// -- layout ---------------------------------------------------------------------------------------

struct StridedLayout {
  int64_t shape[kMaxRank];
  int64_t strides[kMaxRank];
  int rank;
};

__global__ void strided_copy_kernel(const float* x, float* y, int64_t n, StridedLayout layout) {
  TP_FOR_EACH_THREAD(i, n) {
    int64_t rest = i, offset = 0;
    for (int d = layout.rank - 1; d >= 0; --d) {
      offset += (rest % layout.shape[d]) * layout.strides[d];
      rest /= layout.shape[d];
    }
    y[i] = x[offset];
  }
}

// -- softmax --------------------------------------------------------------------------------------

/// Softmax of the first `visible` of n contiguous values of one row; the rest of the row is 0.
__device__ void softmax_row(const float* x, float* y, int64_t n, int64_t visible, bool log,
                            float* scratch) {
  float mx = -INFINITY;
  for (int64_t j = threadIdx.x; j < visible; j += blockDim.x) mx = fmaxf(mx, x[j]);
  mx = block_max(mx, scratch);
  float sum = 0.0f;
  for (int64_t j = threadIdx.x; j < visible; j += blockDim.x) sum += expf(x[j] - mx);
  sum = block_sum(sum, scratch);
  if (log) {
    float shift = mx + logf(sum);
    for (int64_t j = threadIdx.x; j < visible; j += blockDim.x) y[j] = x[j] - shift;
  } else {
    float inv = 1.0f / sum;
    for (int64_t j = threadIdx.x; j < visible; j += blockDim.x) y[j] = expf(x[j] - mx) * inv;
  }
  for (int64_t j = visible + threadIdx.x; j < n; j += blockDim.x) y[j] = 0.0f;
}

__global__ void softmax_rows_kernel(const float* x, float* y, int64_t rows, int64_t n, bool log) {
  __shared__ float scratch[kWarpSize];
  TP_FOR_EACH_ROW(row, rows) softmax_row(x + row * n, y + row * n, n, n, log, &scratch[0]);
}

__global__ void causal_softmax_kernel(const float* x, float* y, int64_t rows, int64_t t_q,
                                      int64_t t_k) {
  __shared__ float scratch[kWarpSize];
  TP_FOR_EACH_ROW(row, rows) {
    int64_t i = row % t_q;
    int64_t visible = i + 1 < t_k ? i + 1 : t_k;
    softmax_row(x + row * t_k, y + row * t_k, t_k, visible, false, &scratch[0]);
  }
}

/// inner > 1: one thread per (outer, inner) column walks the n rows of its column.
__global__ void softmax_columns_kernel(const float* x, float* y, int64_t outer, int64_t n,
                                       int64_t inner, bool log) {
  TP_FOR_EACH_THREAD(c, outer * inner) {
    int64_t base = (c / inner) * n * inner + c % inner;
    const float* xc = x + base;
    float* yc = y + base;
    float mx = -INFINITY;
    for (int64_t r = 0; r < n; ++r) mx = fmaxf(mx, xc[r * inner]);
    float sum = 0.0f;
    for (int64_t r = 0; r < n; ++r) sum += expf(xc[r * inner] - mx);
    if (log) {
      float shift = mx + logf(sum);
      for (int64_t r = 0; r < n; ++r) yc[r * inner] = xc[r * inner] - shift;
    } else {
      float inv = 1.0f / sum;
      for (int64_t r = 0; r < n; ++r) yc[r * inner] = expf(xc[r * inner] - mx) * inv;
    }
  }
}

__global__ void softmax_backward_rows_kernel(const float* y, const float* gy, float* gx,
                                             int64_t rows, int64_t n, bool log) {
  __shared__ float scratch[kWarpSize];
  TP_FOR_EACH_ROW(row, rows) {
    const float* yr = y + row * n;
    const float* gr = gy + row * n;
    float* out = gx + row * n;
    float dot = 0.0f;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) dot += log ? gr[j] : gr[j] * yr[j];
    dot = block_sum(dot, &scratch[0]);
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x)
      out[j] = log ? gr[j] - expf(yr[j]) * dot : yr[j] * (gr[j] - dot);
  }
}

__global__ void softmax_backward_columns_kernel(const float* y, const float* gy, float* gx,
                                                int64_t outer, int64_t n, int64_t inner, bool log) {
  TP_FOR_EACH_THREAD(c, outer * inner) {
    int64_t base = (c / inner) * n * inner + c % inner;
    float dot = 0.0f;
    for (int64_t r = 0; r < n; ++r) {
      int64_t k = base + r * inner;
      dot += log ? gy[k] : gy[k] * y[k];
    }
    for (int64_t r = 0; r < n; ++r) {
      int64_t k = base + r * inner;
      gx[k] = log ? gy[k] - expf(y[k]) * dot : y[k] * (gy[k] - dot);
    }
  }
}

// -- layer norm -----------------------------------------------------------------------------------

__global__ void layer_norm_kernel(const float* x, const float* weight, const float* bias, float* y,
                                  float* mean, float* rstd, int64_t rows, int64_t cols, float eps) {
  __shared__ float scratch[kWarpSize];
  TP_FOR_EACH_ROW(row, rows) {
    const float* xr = x + row * cols;
    float* yr = y + row * cols;
    float s = 0.0f;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) s += xr[j];
    float m = block_sum(s, &scratch[0]) / static_cast<float>(cols);
    float v = 0.0f;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) v += (xr[j] - m) * (xr[j] - m);
    float rs = 1.0f / sqrtf(block_sum(v, &scratch[0]) / static_cast<float>(cols) + eps);
    if (threadIdx.x == 0) {
      mean[row] = m;
      rstd[row] = rs;
    }
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
      float h = (xr[j] - m) * rs;
      if (weight) h *= weight[j];
      if (bias) h += bias[j];
      yr[j] = h;
    }
  }
}

__global__ void layer_norm_backward_input_kernel(const float* x, const float* weight,
                                                 const float* mean, const float* rstd,
                                                 const float* gy, float* gx, int64_t rows,
                                                 int64_t cols) {
  __shared__ float scratch[kWarpSize];
  TP_FOR_EACH_ROW(row, rows) {
    const float* xr = x + row * cols;
    const float* gr = gy + row * cols;
    float* out = gx + row * cols;
    float m = mean[row], rs = rstd[row];
    float sum_d = 0.0f, sum_dx = 0.0f;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
      float d = weight ? gr[j] * weight[j] : gr[j];
      sum_d += d;
      sum_dx += d * (xr[j] - m) * rs;
    }
    float inv = 1.0f / static_cast<float>(cols);
    float a = block_sum(sum_d, &scratch[0]) * inv;
    float b = block_sum(sum_dx, &scratch[0]) * inv;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
      float d = weight ? gr[j] * weight[j] : gr[j];
      out[j] = rs * (d - a - (xr[j] - m) * rs * b);
    }
  }
}

/// Rows per chunk of the layer-norm parameter gradient: a GPT's 768 columns and a few thousand
/// rows give tens of thousands of threads instead of 768 walking every row.
constexpr int64_t kRowsPerChunk = 64;

/// One thread per (chunk, column) sums the chunk's rows in order into partial[chunk][column].
__global__ void layer_norm_backward_params_partial_kernel(const float* x, const float* mean,
                                                          const float* rstd, const float* gy,
                                                          float* partial_w, float* partial_b,
                                                          int64_t rows, int64_t cols,
                                                          int64_t chunks) {
  TP_FOR_EACH_THREAD(i, chunks * cols) {
    int64_t chunk = i / cols, j = i % cols;
    int64_t end = (chunk + 1) * kRowsPerChunk < rows ? (chunk + 1) * kRowsPerChunk : rows;
    float w = 0.0f, b = 0.0f;
    for (int64_t r = chunk * kRowsPerChunk; r < end; ++r) {
      float g = gy[r * cols + j];
      w += g * ((x[r * cols + j] - mean[r]) * rstd[r]);
      b += g;
    }
    partial_w[i] = w;
    partial_b[i] = b;
  }
}

/// One thread per column adds the chunks' partial sums in chunk order.
__global__ void layer_norm_backward_params_sum_kernel(const float* partial_w,
                                                      const float* partial_b, float* gweight,
                                                      float* gbias, int64_t cols, int64_t chunks) {
  TP_FOR_EACH_THREAD(j, cols) {
    float w = 0.0f, b = 0.0f;
    for (int64_t c = 0; c < chunks; ++c) {
      w += partial_w[c * cols + j];
      b += partial_b[c * cols + j];
    }
    if (gweight) gweight[j] = w;
    if (gbias) gbias[j] = b;
  }
}

// -- embedding ------------------------------------------------------------------------------------

__global__ void embedding_kernel(const float* ids, const float* weight, float* out, int64_t n,
                                 int64_t dim) {
  TP_FOR_EACH_THREAD(i, n * dim) {
    int64_t row = i / dim;
    out[i] = weight[static_cast<int64_t>(ids[row]) * dim + i % dim];
  }
}

/// The ids as sort keys, and their positions as the values that travel with them.
__global__ void embedding_keys_kernel(const float* ids, int* keys, int* positions, int64_t n) {
  TP_FOR_EACH_THREAD(i, n) {
    keys[i] = static_cast<int>(ids[i]);
    positions[i] = static_cast<int>(i);
  }
}

/// After a stable sort by id, the rows of one id are consecutive and in their original order. One
/// thread per (sorted position, column) that starts an id's run adds the run's rows of gy in
/// order: the CPU's summation order, without atomics.
__global__ void embedding_backward_sorted_kernel(const int* keys, const int* positions,
                                                 const float* gy, float* gweight, int64_t n,
                                                 int64_t dim) {
  TP_FOR_EACH_THREAD(i, n * dim) {
    int64_t p = i / dim, j = i % dim;
    if (p > 0 && keys[p - 1] == keys[p]) continue;  // not the start of a run
    float sum = 0.0f;
    for (int64_t q = p; q < n && keys[q] == keys[p]; ++q)
      sum += gy[static_cast<int64_t>(positions[q]) * dim + j];
    gweight[static_cast<int64_t>(keys[p]) * dim + j] = sum;
  }
}

/// Device scratch from the caching allocator, on the current device; released when the launch
/// returns, which is safe in stream order (every later user of the block runs on the same stream).
class Scratch {
 public:
  explicit Scratch(size_t bytes) : bytes_(bytes) {
    TP_CUDA_CHECK(cudaGetDevice(&device_));
    ptr_ = caching_allocator().allocate(bytes_, Device(DeviceType::CUDA, device_));
  }
  ~Scratch() { caching_allocator().deallocate(ptr_, bytes_, Device(DeviceType::CUDA, device_)); }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  template <typename T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }

 private:
  size_t bytes_;
  int device_ = 0;
  void* ptr_ = nullptr;
};

// -- cross entropy --------------------------------------------------------------------------------

__global__ void nll_rows_kernel(const float* logp, const float* targets, float* loss, int64_t rows,
                                int64_t classes, int64_t ignore_index) {
  TP_FOR_EACH_THREAD(r, rows) {
    auto t = static_cast<int64_t>(targets[r]);
    loss[r] = t == ignore_index ? 0.0f : -logp[r * classes + t];
  }
}

__global__ void cross_entropy_backward_kernel(const float* logp, const float* targets,
                                              const float* grad_rows, float* gx, int64_t rows,
                                              int64_t classes, int64_t ignore_index) {
  TP_FOR_EACH_THREAD(i, rows * classes) {
    int64_t r = i / classes, c = i % classes;
    auto t = static_cast<int64_t>(targets[r]);
    if (t == ignore_index) {
      gx[i] = 0.0f;
    } else {
      float g = grad_rows[r];
      float v = g * expf(logp[i]);
      gx[i] = c == t ? v - g : v;
    }
  }
}

}  // namespace

void launch_strided_copy(const float* x, const int64_t* x_strides, float* y, const int64_t* shape,
                         int rank, cudaStream_t stream) {
  if (rank > kMaxRank) throw std::invalid_argument("strided_copy supports at most 8 dimensions");
  StridedLayout layout{};
  layout.rank = rank;
  int64_t n = 1;
  for (int d = 0; d < rank; ++d) {
    layout.shape[d] = shape[d];
    layout.strides[d] = x_strides[d];
    n *= shape[d];
  }
  if (n <= 0) return;
  strided_copy_kernel<<<grid_for(n), kBlockSize, 0, stream>>>(x, y, n, layout);
  TP_CUDA_CHECK_LAUNCH();
}

void launch_softmax(const float* x, float* y, int64_t outer, int64_t n, int64_t inner, bool log,
                    cudaStream_t stream) {
  if (outer <= 0 || n <= 0 || inner <= 0) return;
  if (inner == 1) {
    softmax_rows_kernel<<<row_grid(outer), kRowThreads, 0, stream>>>(x, y, outer, n, log);
  } else {
    softmax_columns_kernel<<<grid_for(outer * inner), kBlockSize, 0, stream>>>(x, y, outer, n,
                                                                               inner, log);
  }
  TP_CUDA_CHECK_LAUNCH();
}

void launch_softmax_backward(const float* y, const float* gy, float* gx, int64_t outer, int64_t n,
                             int64_t inner, bool log, cudaStream_t stream) {
  if (outer <= 0 || n <= 0 || inner <= 0) return;
  if (inner == 1) {
    softmax_backward_rows_kernel<<<row_grid(outer), kRowThreads, 0, stream>>>(y, gy, gx, outer, n,
                                                                              log);
  } else {
    softmax_backward_columns_kernel<<<grid_for(outer * inner), kBlockSize, 0, stream>>>(
        y, gy, gx, outer, n, inner, log);
  }
  TP_CUDA_CHECK_LAUNCH();
}

void launch_causal_softmax(const float* x, float* y, int64_t batch, int64_t t_q, int64_t t_k,
                           cudaStream_t stream) {
  int64_t rows = batch * t_q;
  if (rows <= 0 || t_k <= 0) return;
  causal_softmax_kernel<<<row_grid(rows), kRowThreads, 0, stream>>>(x, y, rows, t_q, t_k);
  TP_CUDA_CHECK_LAUNCH();
}

void launch_layer_norm(const float* x, const float* weight, const float* bias, float* y,
                       float* mean, float* rstd, int64_t rows, int64_t cols, float eps,
                       cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return;
  layer_norm_kernel<<<row_grid(rows), kRowThreads, 0, stream>>>(x, weight, bias, y, mean, rstd,
                                                                rows, cols, eps);
  TP_CUDA_CHECK_LAUNCH();
}

void launch_layer_norm_backward_input(const float* x, const float* weight, const float* mean,
                                      const float* rstd, const float* gy, float* gx, int64_t rows,
                                      int64_t cols, cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return;
  layer_norm_backward_input_kernel<<<row_grid(rows), kRowThreads, 0, stream>>>(
      x, weight, mean, rstd, gy, gx, rows, cols);
  TP_CUDA_CHECK_LAUNCH();
}

void launch_layer_norm_backward_params(const float* x, const float* mean, const float* rstd,
                                       const float* gy, float* gweight, float* gbias, int64_t rows,
                                       int64_t cols, cudaStream_t stream) {
  if (cols <= 0 || (!gweight && !gbias)) return;
  const int64_t chunks = rows > 0 ? (rows + kRowsPerChunk - 1) / kRowsPerChunk : 0;
  Scratch partial(static_cast<size_t>(2 * (chunks > 0 ? chunks : 1) * cols) * sizeof(float));
  float* partial_w = partial.as<float>();
  float* partial_b = partial_w + (chunks > 0 ? chunks : 1) * cols;
  if (chunks > 0) {
    layer_norm_backward_params_partial_kernel<<<grid_for(chunks * cols), kBlockSize, 0, stream>>>(
        x, mean, rstd, gy, partial_w, partial_b, rows, cols, chunks);
    TP_CUDA_CHECK_LAUNCH();
  }
  layer_norm_backward_params_sum_kernel<<<grid_for(cols), kBlockSize, 0, stream>>>(
      partial_w, partial_b, gweight, gbias, cols, chunks);
  TP_CUDA_CHECK_LAUNCH();
}

void launch_embedding(const float* ids, const float* weight, float* out, int64_t n, int64_t dim,
                      cudaStream_t stream) {
  if (n <= 0 || dim <= 0) return;
  embedding_kernel<<<grid_for(n * dim), kBlockSize, 0, stream>>>(ids, weight, out, n, dim);
  TP_CUDA_CHECK_LAUNCH();
}

void launch_embedding_backward(const float* ids, const float* gy, float* gweight, int64_t n,
                               int64_t dim, int64_t vocab, cudaStream_t stream) {
  if (dim <= 0 || vocab <= 0) return;
  TP_CUDA_CHECK(
      cudaMemsetAsync(gweight, 0, static_cast<size_t>(vocab * dim) * sizeof(float), stream));
  if (n <= 0) return;
  if (n > INT32_MAX || vocab > INT32_MAX)
    throw std::invalid_argument("CUDA embedding backward: more than 2^31 ids or rows");
  // Keys in, keys sorted, positions in, positions sorted; then the sort's own scratch.
  Scratch lists(static_cast<size_t>(4 * n) * sizeof(int));
  int* keys = lists.as<int>();
  int* sorted_keys = keys + n;
  int* positions = keys + 2 * n;
  int* sorted_positions = keys + 3 * n;
  embedding_keys_kernel<<<grid_for(n), kBlockSize, 0, stream>>>(ids, keys, positions, n);
  TP_CUDA_CHECK_LAUNCH();
  int end_bit = 1;
  while (end_bit < 31 && (int64_t{1} << end_bit) < vocab) ++end_bit;
  size_t sort_bytes = 0;
  TP_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, sort_bytes, keys, sorted_keys, positions,
                                                sorted_positions, static_cast<int>(n), 0, end_bit,
                                                stream));
  Scratch sort_scratch(sort_bytes > 0 ? sort_bytes : 1);
  TP_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(sort_scratch.as<void>(), sort_bytes, keys,
                                                sorted_keys, positions, sorted_positions,
                                                static_cast<int>(n), 0, end_bit, stream));
  embedding_backward_sorted_kernel<<<grid_for(n * dim), kBlockSize, 0, stream>>>(
      sorted_keys, sorted_positions, gy, gweight, n, dim);
  TP_CUDA_CHECK_LAUNCH();
}

void launch_nll_rows(const float* logp, const float* targets, float* loss, int64_t rows,
                     int64_t classes, int64_t ignore_index, cudaStream_t stream) {
  if (rows <= 0) return;
  nll_rows_kernel<<<grid_for(rows), kBlockSize, 0, stream>>>(logp, targets, loss, rows, classes,
                                                             ignore_index);
  TP_CUDA_CHECK_LAUNCH();
}

void launch_cross_entropy_backward(const float* logp, const float* targets, const float* grad_rows,
                                   float* gx, int64_t rows, int64_t classes, int64_t ignore_index,
                                   cudaStream_t stream) {
  if (rows <= 0 || classes <= 0) return;
  cross_entropy_backward_kernel<<<grid_for(rows * classes), kBlockSize, 0, stream>>>(
      logp, targets, grad_rows, gx, rows, classes, ignore_index);
  TP_CUDA_CHECK_LAUNCH();
}

}  // namespace tensorplay::cuda
