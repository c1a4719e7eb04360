// Host kernels for the neural-network ops. Inner loops run over contiguous memory so the compiler
// can vectorise them; reductions accumulate in a fixed order so results are deterministic.
#include "tensorplay/cpu_kernels/nn_kernels.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

namespace tensorplay::cpu_kernels {

void strided_copy(const float* x, const int64_t* xs, float* y, const int64_t* shape, int rank) {
  int64_t n = 1;
  for (int d = 0; d < rank; ++d) n *= shape[d];
  if (n == 0) return;
  if (rank == 0) {
    y[0] = x[0];
    return;
  }
  int64_t inner = shape[rank - 1], is = xs[rank - 1];
  int64_t index[8] = {0};
  int64_t off = 0;
  for (int64_t o = 0; o < n; o += inner) {
    const float* src = x + off;
    float* dst = y + o;
    if (is == 1) {
      std::memcpy(dst, src, inner * sizeof(float));
    } else {
      for (int64_t i = 0; i < inner; ++i) dst[i] = src[i * is];
    }
    for (int d = rank - 2; d >= 0; --d) {
      if (++index[d] < shape[d]) {
        off += xs[d];
        break;
      }
      off -= xs[d] * (shape[d] - 1);
      index[d] = 0;
    }
  }
}

namespace {

// Softmax of one contiguous row of n values.
void softmax_row(const float* x, float* y, int64_t n, bool log) {
  float mx = -std::numeric_limits<float>::infinity();
  for (int64_t j = 0; j < n; ++j) mx = std::max(mx, x[j]);
  float sum = 0.0f;
  if (log) {
    for (int64_t j = 0; j < n; ++j) sum += std::exp(x[j] - mx);
    float shift = mx + std::log(sum);
    for (int64_t j = 0; j < n; ++j) y[j] = x[j] - shift;
  } else {
    for (int64_t j = 0; j < n; ++j) {
      y[j] = std::exp(x[j] - mx);
      sum += y[j];
    }
    float inv = 1.0f / sum;
    for (int64_t j = 0; j < n; ++j) y[j] *= inv;
  }
}

void softmax_row_backward(const float* y, const float* gy, float* gx, int64_t n, bool log) {
  float dot = 0.0f;
  if (log) {
    for (int64_t j = 0; j < n; ++j) dot += gy[j];
    for (int64_t j = 0; j < n; ++j) gx[j] = gy[j] - std::exp(y[j]) * dot;
  } else {
    for (int64_t j = 0; j < n; ++j) dot += gy[j] * y[j];
    for (int64_t j = 0; j < n; ++j) gx[j] = y[j] * (gy[j] - dot);
  }
}

}  // namespace

void softmax(const float* x, float* y, int64_t outer, int64_t n, int64_t inner, bool log) {
  if (inner == 1) {
    for (int64_t o = 0; o < outer; ++o) softmax_row(x + o * n, y + o * n, n, log);
    return;
  }
  // Reduce across rows of `inner` contiguous values: per-column max and sum in scratch arrays.
  std::vector<float> mx(inner), sum(inner);
  for (int64_t o = 0; o < outer; ++o) {
    const float* xo = x + o * n * inner;
    float* yo = y + o * n * inner;
    std::fill(mx.begin(), mx.end(), -std::numeric_limits<float>::infinity());
    std::fill(sum.begin(), sum.end(), 0.0f);
    for (int64_t r = 0; r < n; ++r)
      for (int64_t i = 0; i < inner; ++i) mx[i] = std::max(mx[i], xo[r * inner + i]);
    for (int64_t r = 0; r < n; ++r)
      for (int64_t i = 0; i < inner; ++i) {
        float e = std::exp(xo[r * inner + i] - mx[i]);
        if (!log) yo[r * inner + i] = e;
        sum[i] += e;
      }
    if (log) {
      for (int64_t i = 0; i < inner; ++i) mx[i] += std::log(sum[i]);
      for (int64_t r = 0; r < n; ++r)
        for (int64_t i = 0; i < inner; ++i) yo[r * inner + i] = xo[r * inner + i] - mx[i];
    } else {
      for (int64_t i = 0; i < inner; ++i) sum[i] = 1.0f / sum[i];
      for (int64_t r = 0; r < n; ++r)
        for (int64_t i = 0; i < inner; ++i) yo[r * inner + i] *= sum[i];
    }
  }
}

void softmax_backward(const float* y, const float* gy, float* gx, int64_t outer, int64_t n,
                      int64_t inner, bool log) {
  if (inner == 1) {
    for (int64_t o = 0; o < outer; ++o)
      softmax_row_backward(y + o * n, gy + o * n, gx + o * n, n, log);
    return;
  }
  std::vector<float> dot(inner);
  for (int64_t o = 0; o < outer; ++o) {
    const float* yo = y + o * n * inner;
    const float* go = gy + o * n * inner;
    float* xo = gx + o * n * inner;
    std::fill(dot.begin(), dot.end(), 0.0f);
    for (int64_t r = 0; r < n; ++r)
      for (int64_t i = 0; i < inner; ++i)
        dot[i] += log ? go[r * inner + i] : go[r * inner + i] * yo[r * inner + i];
    for (int64_t r = 0; r < n; ++r)
      for (int64_t i = 0; i < inner; ++i) {
        int64_t k = r * inner + i;
        xo[k] = log ? go[k] - std::exp(yo[k]) * dot[i] : yo[k] * (go[k] - dot[i]);
      }
  }
}

void causal_softmax(const float* x, float* y, int64_t batch, int64_t t_q, int64_t t_k) {
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t i = 0; i < t_q; ++i) {
      const float* xr = x + (b * t_q + i) * t_k;
      float* yr = y + (b * t_q + i) * t_k;
      int64_t visible = std::min(i + 1, t_k);
      softmax_row(xr, yr, visible, false);
      for (int64_t j = visible; j < t_k; ++j) yr[j] = 0.0f;
    }
  }
}

void layer_norm(const float* x, const float* weight, const float* bias, float* y, float* mean,
                float* rstd, int64_t rows, int64_t cols, float eps) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    float* yr = y + r * cols;
    float s = 0.0f;
    for (int64_t j = 0; j < cols; ++j) s += xr[j];
    float m = s / static_cast<float>(cols);
    float v = 0.0f;
    for (int64_t j = 0; j < cols; ++j) v += (xr[j] - m) * (xr[j] - m);
    float rs = 1.0f / std::sqrt(v / static_cast<float>(cols) + eps);
    mean[r] = m;
    rstd[r] = rs;
    if (weight && bias) {
      for (int64_t j = 0; j < cols; ++j) yr[j] = (xr[j] - m) * rs * weight[j] + bias[j];
    } else if (weight) {
      for (int64_t j = 0; j < cols; ++j) yr[j] = (xr[j] - m) * rs * weight[j];
    } else if (bias) {
      for (int64_t j = 0; j < cols; ++j) yr[j] = (xr[j] - m) * rs + bias[j];
    } else {
      for (int64_t j = 0; j < cols; ++j) yr[j] = (xr[j] - m) * rs;
    }
  }
}

void layer_norm_backward_input(const float* x, const float* weight, const float* mean,
                               const float* rstd, const float* gy, float* gx, int64_t rows,
                               int64_t cols) {
  // gx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)), dxhat = gy * weight.
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    const float* gr = gy + r * cols;
    float* out = gx + r * cols;
    float m = mean[r], rs = rstd[r];
    float sum_d = 0.0f, sum_dx = 0.0f;
    for (int64_t j = 0; j < cols; ++j) {
      float d = weight ? gr[j] * weight[j] : gr[j];
      sum_d += d;
      sum_dx += d * (xr[j] - m) * rs;
    }
    float inv = 1.0f / static_cast<float>(cols);
    float a = sum_d * inv, b = sum_dx * inv;
    for (int64_t j = 0; j < cols; ++j) {
      float d = weight ? gr[j] * weight[j] : gr[j];
      out[j] = rs * (d - a - (xr[j] - m) * rs * b);
    }
  }
}

void layer_norm_backward_params(const float* x, const float* mean, const float* rstd,
                                const float* gy, float* gweight, float* gbias, int64_t rows,
                                int64_t cols) {
  if (gweight) std::fill(gweight, gweight + cols, 0.0f);
  if (gbias) std::fill(gbias, gbias + cols, 0.0f);
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    const float* gr = gy + r * cols;
    float m = mean[r], rs = rstd[r];
    if (gweight)
      for (int64_t j = 0; j < cols; ++j) gweight[j] += gr[j] * ((xr[j] - m) * rs);
    if (gbias)
      for (int64_t j = 0; j < cols; ++j) gbias[j] += gr[j];
  }
}

void embedding(const float* ids, const float* weight, float* out, int64_t n, int64_t dim) {
  for (int64_t i = 0; i < n; ++i) {
    auto id = static_cast<int64_t>(ids[i]);
    std::memcpy(out + i * dim, weight + id * dim, dim * sizeof(float));
  }
}

void embedding_backward(const float* ids, const float* gy, float* gweight, int64_t n, int64_t dim,
                        int64_t vocab) {
  std::fill(gweight, gweight + vocab * dim, 0.0f);
  for (int64_t i = 0; i < n; ++i) {
    float* dst = gweight + static_cast<int64_t>(ids[i]) * dim;
    const float* src = gy + i * dim;
    for (int64_t j = 0; j < dim; ++j) dst[j] += src[j];
  }
}

void nll_rows(const float* logp, const float* targets, float* loss, int64_t rows, int64_t classes,
              int64_t ignore_index) {
  for (int64_t r = 0; r < rows; ++r) {
    auto t = static_cast<int64_t>(targets[r]);
    loss[r] = t == ignore_index ? 0.0f : -logp[r * classes + t];
  }
}

void cross_entropy_backward(const float* logp, const float* targets, const float* grad_rows,
                            float* gx, int64_t rows, int64_t classes, int64_t ignore_index) {
  for (int64_t r = 0; r < rows; ++r) {
    auto t = static_cast<int64_t>(targets[r]);
    float* out = gx + r * classes;
    if (t == ignore_index) {
      std::fill(out, out + classes, 0.0f);
      continue;
    }
    const float* lp = logp + r * classes;
    float g = grad_rows[r];
    for (int64_t c = 0; c < classes; ++c) out[c] = g * std::exp(lp[c]);
    out[t] -= g;
  }
}

}  // namespace tensorplay::cpu_kernels
