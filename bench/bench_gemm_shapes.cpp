// The products our models run, each through the tensor API against the fastest raw library call
// on this machine (OpenBLAS cblas_sgemm, oneDNN dnnl_sgemm, oneDNN's matmul primitive), on one
// thread. Times are thread CPU seconds (robust to other jobs sharing the cores), best of
// `--rounds` rounds of about 0.2 s each, API and raw calls alternating. Prints one JSON line per
// shape and a last line with the worst ratio (goal: at least 0.95).
//
//   ./build/bench/bench_gemm_shapes [--rounds 3]
#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <dnnl.hpp>
#include <functional>
#include <string>
#include <vector>

#include "tensorplay/core/backend.h"
#include "tensorplay/core/cpu_threads.h"
#include "tensorplay/tensor.h"

namespace tp = tensorplay;

namespace {

double thread_cpu_seconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// A call that returns the thread CPU seconds of the part it times (usually all of it).
using TimedCall = std::function<double()>;

TimedCall timed(std::function<void()> f) {
  return [f = std::move(f)] {
    const double start = thread_cpu_seconds();
    f();
    return thread_cpu_seconds() - start;
  };
}

// Seconds per call: the best over batches of calls, each batch at least 0.04 s of timed work.
double seconds_per_call(const TimedCall& f) {
  f();
  double best = 1e30;
  for (int batch = 0; batch < 5; ++batch) {
    int calls = 0;
    double timed_total = 0;
    do {
      timed_total += f();
      ++calls;
    } while (timed_total < 0.04);
    best = std::min(best, timed_total / calls);
  }
  return best;
}

// One product shape: C[batch, m, n] = op(A) op(B) as the model runs it.
struct Shape {
  std::string name;
  bool ta, tb;
  int64_t batch, m, n, k;
};

// The raw calls for one shape; each returns its name and runs on preallocated buffers.
struct RawCalls {
  std::vector<float> a, b, c;
  std::vector<std::pair<std::string, TimedCall>> calls;
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  dnnl::matmul matmul;
  dnnl::memory am, bm, cm;

  explicit RawCalls(const Shape& s)
      : a(s.batch * s.m * s.k, 0.5f), b(s.batch * s.k * s.n, 0.25f), c(s.batch * s.m * s.n) {
    const int64_t lda = s.ta ? s.m : s.k, ldb = s.tb ? s.k : s.n;
    calls.emplace_back("openblas_sgemm", timed([this, s, lda, ldb] {
                         for (int64_t i = 0; i < s.batch; ++i)
                           cblas_sgemm(CblasRowMajor, s.ta ? CblasTrans : CblasNoTrans,
                                       s.tb ? CblasTrans : CblasNoTrans, s.m, s.n, s.k, 1.0f,
                                       &a[i * s.m * s.k], lda, &b[i * s.k * s.n], ldb, 0.0f,
                                       &c[i * s.m * s.n], s.n);
                       }));
    calls.emplace_back("dnnl_sgemm", timed([this, s, lda, ldb] {
                         for (int64_t i = 0; i < s.batch; ++i)
                           dnnl_sgemm(s.ta ? 'T' : 'N', s.tb ? 'T' : 'N', s.m, s.n, s.k, 1.0f,
                                      &a[i * s.m * s.k], lda, &b[i * s.k * s.n], ldb, 0.0f,
                                      &c[i * s.m * s.n], s.n);
                       }));
    using dims = dnnl::memory::dims;
    auto f32 = dnnl::memory::data_type::f32;
    dnnl::memory::desc ad({s.batch, s.m, s.k}, f32,
                          s.ta ? dims{s.m * s.k, 1, s.m} : dims{s.m * s.k, s.k, 1});
    dnnl::memory::desc bd({s.batch, s.k, s.n}, f32,
                          s.tb ? dims{s.k * s.n, 1, s.k} : dims{s.k * s.n, s.n, 1});
    dnnl::memory::desc cd({s.batch, s.m, s.n}, f32, dims{s.m * s.n, s.n, 1});
    matmul = dnnl::matmul(dnnl::matmul::primitive_desc(dnnl::matmul::desc(ad, bd, cd), engine));
    am = dnnl::memory(ad, engine, a.data());
    bm = dnnl::memory(bd, engine, b.data());
    cm = dnnl::memory(cd, engine, c.data());
    calls.emplace_back(
        "dnnl_matmul", timed([this] {
          matmul.execute(stream, {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm}});
          stream.wait();
        }));
  }
};

// The same product through the tensor API, the way the model's ops run it.
TimedCall through_api(const Shape& s) {
  if (s.batch > 1) {  // attention: bmm of contiguous operands
    tp::Tensor a = tp::ones({s.batch, s.m, s.k}), b = tp::ones({s.batch, s.k, s.n});
    return timed([a, b] { tp::bmm(a, b); });
  }
  if (s.tb) {  // a linear layer's forward: x[m, k] W[n, k]^T
    tp::Tensor x = tp::ones({s.m, s.k}), w = tp::ones({s.n, s.k});
    return timed([x, w] { tp::linear(x, w); });
  }
  if (s.ta) {  // a linear layer's weight gradient dW[m, n] = dY^T[m, k] X[k, n], alone
    // The split backward's W step (what ZB schedules run): its only product is this one. The
    // forward and the input-gradient step run before it, outside the timed part.
    tp::Tensor x = tp::ones({s.k, s.n}), w = tp::ones({s.m, s.n}), g = tp::ones({s.k, s.m});
    x.requires_grad_();
    w.requires_grad_();
    return [x, w, g]() mutable {
      w.set_grad(tp::Tensor());
      tp::Tensor y = tp::linear(x, w);
      auto stash = tp::autograd::backward_input({y}, {g}, {x});
      const double start = thread_cpu_seconds();
      tp::autograd::backward_weight(std::move(stash));
      return thread_cpu_seconds() - start;
    };
  }
  tp::Tensor a = tp::ones({s.m, s.k}), b = tp::ones({s.k, s.n});
  return timed([a, b] { tp::matmul(a, b); });
}

int option(int argc, char** argv, const char* name, int fallback) {
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], name) == 0) return std::atoi(argv[i + 1]);
  return fallback;
}

}  // namespace

int main(int argc, char** argv) {
  const int rounds = option(argc, argv, "--rounds", 3);
  tp::set_num_threads(1);
  openblas_set_num_threads(1);
  omp_set_num_threads(1);
  const std::vector<Shape> shapes = {
      {"square 1024x1024x1024", false, false, 1, 1024, 1024, 1024},
      {"skinny forward 16x1024x1024 (x W^T)", false, true, 1, 16, 1024, 1024},
      {"skinny input gradient 16x1024x1024", false, false, 1, 16, 1024, 1024},
      {"skinny weight gradient 1024x1024x16 (dY^T X)", true, false, 1, 1024, 1024, 16},
      {"attention scores 64 x 128x128x64", false, false, 64, 128, 128, 64},
      {"attention values 64 x 128x64x128", false, false, 64, 128, 64, 128},
  };
  double worst = 1e30;
  std::string worst_name;
  for (const Shape& s : shapes) {
    RawCalls raw(s);
    auto api = through_api(s);
    double best_api = 1e30, best_raw = 1e30;
    std::vector<double> best_each(raw.calls.size(), 1e30);
    for (int r = 0; r < rounds; ++r) {
      best_api = std::min(best_api, seconds_per_call(api));
      for (size_t i = 0; i < raw.calls.size(); ++i)
        best_each[i] = std::min(best_each[i], seconds_per_call(raw.calls[i].second));
    }
    // The weight gradient also straight through the kernel table's product into a fresh tensor:
    // what the tensor core's product path costs without the autograd W step around it.
    double kernel_table = 0;
    if (s.ta) {
      std::vector<float> a(s.k * s.m, 1.0f), b(s.k * s.n, 1.0f);
      const tp::Backend& be = tp::backend_for(tp::cpu());
      auto call = timed([&] {
        tp::Tensor out = tp::empty({s.m, s.n});
        be.gemm(true, false, s.m, s.n, s.k, 1.0f, a.data(), s.m, b.data(), s.n, 0.0f,
                out.data<float>(), s.n);
      });
      double best = 1e30;
      for (int r = 0; r < rounds; ++r) best = std::min(best, seconds_per_call(call));
      kernel_table = 2.0 * s.m * s.n * s.k / best * 1e-9;
    }
    size_t fastest = std::min_element(best_each.begin(), best_each.end()) - best_each.begin();
    best_raw = best_each[fastest];
    const double flop = 2.0 * s.batch * s.m * s.n * s.k;
    const double ratio = best_raw / best_api;
    std::printf("{\"shape\": \"%s\", \"api_gflops\": %.1f", s.name.c_str(), flop / best_api * 1e-9);
    for (size_t i = 0; i < raw.calls.size(); ++i)
      std::printf(", \"%s_gflops\": %.1f", raw.calls[i].first.c_str(), flop / best_each[i] * 1e-9);
    if (kernel_table > 0)
      std::printf(", \"kernel_table_gflops\": %.1f, \"kernel_table_over_fastest\": %.3f",
                  kernel_table, kernel_table / (flop / best_raw * 1e-9));
    std::printf(", \"fastest_raw\": \"%s\", \"api_over_fastest\": %.3f}\n",
                raw.calls[fastest].first.c_str(), ratio);
    if (ratio < worst) {
      worst = ratio;
      worst_name = s.name;
    }
  }
  std::printf(
      "{\"bench\": \"gemm_shapes\", \"threads\": 1, \"rounds\": %d, \"worst_ratio\": %.3f, "
      "\"worst_shape\": \"%s\", \"goal\": 0.95}\n",
      rounds, worst, worst_name.c_str());
  return 0;
}
