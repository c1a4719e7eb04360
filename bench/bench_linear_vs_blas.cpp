// Linear layer forward + backward through the tensor API against the same work done by raw
// OpenBLAS calls (3 sgemms, a bias add and a bias-gradient column sum) on preallocated buffers.
//
// Both sides run on one BLAS thread (openblas_set_num_threads(1), declared in OpenBLAS's cblas.h),
// so the figure measures our overhead (allocation, autograd, gradient accumulation), not thread
// scheduling. Time is the thread's CPU time (CLOCK_THREAD_CPUTIME_ID, which counts page faults
// and other kernel work done for the thread but not time spent descheduled), so a loaded shared
// machine still gives a fair comparison; wall-clock times are printed too. Each shape is timed
// best-of-N with the two sides interleaved.
// Output: one JSON line per shape, then
//   {"bench":"bench_linear_vs_blas","ratio":<geometric mean of ours/raw rate>,"worst":...}
// A ratio of 1 means the tensor API is as fast as raw BLAS; the target is >= 0.95.
//
// Usage: bench_linear_vs_blas [repeats (default 7)]
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <vector>

#include "tensorplay/tensor.h"

namespace tp = tensorplay;

namespace {

struct Shape3 {
  int64_t batch, in, out;
};

// CPU time of this thread and wall time, in seconds.
struct Clock {
  double cpu, wall;
  static Clock now() {
    timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    double wall =
        std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
    return {ts.tv_sec + ts.tv_nsec * 1e-9, wall};
  }
  Clock since() const {
    Clock n = now();
    return {n.cpu - cpu, n.wall - wall};
  }
};

// One training-step's worth of linear work through the tensor API: forward, then backward into
// fresh gradients (as after zero_grad with set_to_none), for x, W and b.
Clock time_ours(const tp::Tensor& x, const tp::Tensor& w, const tp::Tensor& b,
                const tp::Tensor& gy) {
  x.impl().grad = nullptr;
  w.impl().grad = nullptr;
  b.impl().grad = nullptr;
  Clock start = Clock::now();
  tp::Tensor y = tp::linear(x, w, b);
  tp::autograd::backward({y}, {gy});
  return start.since();
}

// The same work on raw buffers: y = x W^T + b; gx = gy W; gW = gy^T x; gb = column sums of gy.
struct RawBuffers {
  std::vector<float> y, gx, gw, gb;
};

Clock time_raw(const Shape3& s, const float* x, const float* w, const float* b, const float* gy,
               RawBuffers& r) {
  const int m = s.batch, k = s.in, n = s.out;
  Clock start = Clock::now();
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, k, 1.0f, x, k, w, k, 0.0f, r.y.data(),
              n);
  for (int i = 0; i < m; ++i) {
    float* row = r.y.data() + static_cast<size_t>(i) * n;
    for (int j = 0; j < n; ++j) row[j] += b[j];
  }
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, k, n, 1.0f, gy, n, w, k, 0.0f,
              r.gx.data(), k);
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, n, k, m, 1.0f, gy, n, x, k, 0.0f,
              r.gw.data(), k);
  std::fill(r.gb.begin(), r.gb.end(), 0.0f);
  for (int i = 0; i < m; ++i) {
    const float* row = gy + static_cast<size_t>(i) * n;
    for (int j = 0; j < n; ++j) r.gb[j] += row[j];
  }
  return start.since();
}

}  // namespace

int main(int argc, char** argv) {
  int repeats = argc > 1 ? std::max(1, std::atoi(argv[1])) : 7;
  openblas_set_num_threads(1);
  tp::set_default_num_threads(1);
  const std::vector<Shape3> shapes = {{512, 1024, 1024}, {2048, 768, 3072}, {128, 256, 256}};
  double log_sum = 0, worst = 1e9;
  for (const Shape3& s : shapes) {
    tp::Generator gen(1);
    tp::Tensor x = tp::randn({s.batch, s.in}, {}, &gen).requires_grad_();
    tp::Tensor w = tp::randn({s.out, s.in}, {}, &gen).requires_grad_();
    tp::Tensor b = tp::randn({s.out}, {}, &gen).requires_grad_();
    tp::Tensor gy = tp::randn({s.batch, s.out}, {}, &gen);
    RawBuffers raw{std::vector<float>(s.batch * s.out), std::vector<float>(s.batch * s.in),
                   std::vector<float>(s.out * s.in), std::vector<float>(s.out)};
    // Warm up both (page faults, BLAS buffers), then interleave timed runs.
    time_ours(x, w, b, gy);
    time_raw(s, x.data<float>(), w.data<float>(), b.data<float>(), gy.data<float>(), raw);
    double best_ours = 1e30, best_raw = 1e30, wall_ours = 1e30, wall_raw = 1e30;
    for (int r = 0; r < repeats; ++r) {
      Clock o = time_ours(x, w, b, gy);
      Clock w_ =
          time_raw(s, x.data<float>(), w.data<float>(), b.data<float>(), gy.data<float>(), raw);
      best_ours = std::min(best_ours, o.cpu);
      best_raw = std::min(best_raw, w_.cpu);
      wall_ours = std::min(wall_ours, o.wall);
      wall_raw = std::min(wall_raw, w_.wall);
    }
    // Same results: the weight gradient of the last tensor-API run against the raw one.
    std::vector<float> gw = w.grad().to_vector();
    double max_diff = 0;
    for (size_t i = 0; i < gw.size(); ++i)
      max_diff = std::max(max_diff, std::abs(double(gw[i]) - raw.gw[i]));
    double flops = 3.0 * 2.0 * s.batch * s.in * s.out;
    double ratio = best_raw / best_ours;  // = our rate / raw rate
    log_sum += std::log(ratio);
    worst = std::min(worst, ratio);
    std::printf(
        "{\"shape\":\"%ldx%ldx%ld\",\"ours_cpu_ms\":%.3f,\"raw_cpu_ms\":%.3f,"
        "\"ours_gflops\":%.2f,\"raw_gflops\":%.2f,\"ratio\":%.4f,\"ours_wall_ms\":%.3f,"
        "\"raw_wall_ms\":%.3f,\"wall_ratio\":%.4f,\"max_abs_diff_grad_w\":%.3g}\n",
        static_cast<long>(s.batch), static_cast<long>(s.in), static_cast<long>(s.out),
        best_ours * 1e3, best_raw * 1e3, flops / best_ours * 1e-9, flops / best_raw * 1e-9, ratio,
        wall_ours * 1e3, wall_raw * 1e3, wall_raw / wall_ours, max_diff);
  }
  std::printf(
      "{\"bench\":\"bench_linear_vs_blas\",\"ratio\":%.4f,\"worst\":%.4f,\"threads\":1,"
      "\"repeats\":%d,\"shapes\":%zu}\n",
      std::exp(log_sum / shapes.size()), worst, repeats, shapes.size());
  return 0;
}
