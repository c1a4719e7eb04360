// CudaBackend's neural-network entries: each makes the output's device current and hands the work
// to the launchers in cuda_nn_kernels.cu on that device's stream.
#include "tensorplay/cuda/cuda_backend.h"
#include "tensorplay/cuda/cuda_device.h"
#include "tensorplay/cuda/cuda_nn_kernels.h"

namespace tensorplay::cuda {

void CudaBackend::strided_copy(const float* x, const int64_t* x_strides, float* y,
                               const int64_t* shape, int rank) const {
  int64_t n = 1;
  for (int d = 0; d < rank; ++d) n *= shape[d];
  if (n <= 0) return;
  int d = device_of(y);
  DeviceGuard guard(d);
  launch_strided_copy(x, x_strides, y, shape, rank, stream(d));
}

void CudaBackend::softmax(const float* x, float* y, int64_t outer, int64_t n, int64_t inner,
                          bool log) const {
  if (outer * n * inner <= 0) return;
  int d = device_of(y);
  DeviceGuard guard(d);
  launch_softmax(x, y, outer, n, inner, log, stream(d));
}

void CudaBackend::softmax_backward(const float* y, const float* gy, float* gx, int64_t outer,
                                   int64_t n, int64_t inner, bool log) const {
  if (outer * n * inner <= 0) return;
  int d = device_of(gx);
  DeviceGuard guard(d);
  launch_softmax_backward(y, gy, gx, outer, n, inner, log, stream(d));
}

void CudaBackend::causal_softmax(const float* x, float* y, int64_t batch, int64_t t_q,
                                 int64_t t_k) const {
  if (batch * t_q * t_k <= 0) return;
  int d = device_of(y);
  DeviceGuard guard(d);
  launch_causal_softmax(x, y, batch, t_q, t_k, stream(d));
}

void CudaBackend::layer_norm(const float* x, const float* weight, const float* bias, float* y,
                             float* mean, float* rstd, int64_t rows, int64_t cols,
                             float eps) const {
  if (rows * cols <= 0) return;
  int d = device_of(y);
  DeviceGuard guard(d);
  launch_layer_norm(x, weight, bias, y, mean, rstd, rows, cols, eps, stream(d));
}

void CudaBackend::layer_norm_backward_input(const float* x, const float* weight, const float* mean,
                                            const float* rstd, const float* gy, float* gx,
                                            int64_t rows, int64_t cols) const {
  if (rows * cols <= 0) return;
  int d = device_of(gx);
  DeviceGuard guard(d);
  launch_layer_norm_backward_input(x, weight, mean, rstd, gy, gx, rows, cols, stream(d));
}

void CudaBackend::layer_norm_backward_params(const float* x, const float* mean, const float* rstd,
                                             const float* gy, float* gweight, float* gbias,
                                             int64_t rows, int64_t cols) const {
  if (cols <= 0 || (!gweight && !gbias)) return;
  int d = device_of(gweight ? gweight : gbias);
  DeviceGuard guard(d);
  launch_layer_norm_backward_params(x, mean, rstd, gy, gweight, gbias, rows, cols, stream(d));
}

void CudaBackend::embedding(const float* ids, const float* weight, float* out, int64_t n,
                            int64_t dim) const {
  if (n * dim <= 0) return;
  int d = device_of(out);
  DeviceGuard guard(d);
  launch_embedding(ids, weight, out, n, dim, stream(d));
}

void CudaBackend::embedding_backward(const float* ids, const float* gy, float* gweight, int64_t n,
                                     int64_t dim, int64_t vocab) const {
  if (vocab * dim <= 0) return;
  int d = device_of(gweight);
  DeviceGuard guard(d);
  launch_embedding_backward(ids, gy, gweight, n, dim, vocab, stream(d));
}

void CudaBackend::nll_rows(const float* logp, const float* targets, float* loss, int64_t rows,
                           int64_t classes, int64_t ignore_index) const {
  if (rows <= 0) return;
  int d = device_of(loss);
  DeviceGuard guard(d);
  launch_nll_rows(logp, targets, loss, rows, classes, ignore_index, stream(d));
}

void CudaBackend::cross_entropy_backward(const float* logp, const float* targets,
                                         const float* grad_rows, float* gx, int64_t rows,
                                         int64_t classes, int64_t ignore_index) const {
  if (rows * classes <= 0) return;
  int d = device_of(gx);
  DeviceGuard guard(d);
  launch_cross_entropy_backward(logp, targets, grad_rows, gx, rows, classes, ignore_index,
                                stream(d));
}

}  // namespace tensorplay::cuda
