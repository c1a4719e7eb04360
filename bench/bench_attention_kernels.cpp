// Host attention, plain (whole probability matrix) against fused (tiles, online softmax), forward
// and backward on one thread, causal, at the GPT benchmark's shape and at longer contexts. Times
// are thread CPU seconds, best of --rounds. Prints one JSON line per shape and a summary line.
//
//   ./build/bench/bench_attention_kernels [--rounds 3]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <vector>

#include "tensorplay/tensor.h"

namespace tp = tensorplay;

namespace {

double thread_cpu_seconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

double seconds_fwd_bwd(int64_t heads, int64_t t, int64_t d, tp::AttentionKernel kernel,
                       int rounds) {
  tp::Generator g(3);
  tp::Tensor q = tp::randn({1, heads, t, d}, {}, &g).requires_grad_();
  tp::Tensor k = tp::randn({1, heads, t, d}, {}, &g).requires_grad_();
  tp::Tensor v = tp::randn({1, heads, t, d}, {}, &g).requires_grad_();
  tp::Tensor seed = tp::randn({1, heads, t, d}, {}, &g);
  auto once = [&] {
    tp::Tensor out = tp::scaled_dot_product_attention(q, k, v, true, kernel);
    out.backward(seed);
  };
  once();
  double best = 1e30;
  for (int r = 0; r < rounds; ++r) {
    int calls = 0;
    double start = thread_cpu_seconds(), elapsed = 0;
    do {
      once();
      ++calls;
      elapsed = thread_cpu_seconds() - start;
    } while (elapsed < 0.3);
    best = std::min(best, elapsed / calls);
  }
  return best;
}

int option(int argc, char** argv, const char* name, int fallback) {
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], name) == 0) return std::atoi(argv[i + 1]);
  return fallback;
}

}  // namespace

int main(int argc, char** argv) {
  const int rounds = option(argc, argv, "--rounds", 3);
  tp::set_default_num_threads(1);
  struct Shape {
    int64_t heads, t, d;
  };
  double worst = 1e30;
  for (Shape s : {Shape{64, 128, 64}, Shape{8, 512, 64}, Shape{4, 2048, 64}}) {
    const double plain = seconds_fwd_bwd(s.heads, s.t, s.d, tp::AttentionKernel::Plain, rounds);
    const double fused = seconds_fwd_bwd(s.heads, s.t, s.d, tp::AttentionKernel::Fused, rounds);
    worst = std::min(worst, plain / fused);
    std::printf(
        "{\"heads\": %lld, \"t\": %lld, \"d\": %lld, \"plain_ms\": %.3f, \"fused_ms\": %.3f, "
        "\"fused_speedup\": %.3f}\n",
        static_cast<long long>(s.heads), static_cast<long long>(s.t), static_cast<long long>(s.d),
        plain * 1e3, fused * 1e3, plain / fused);
  }
  std::printf(
      "{\"bench\": \"attention_kernels\", \"causal\": true, \"worst_fused_speedup\": %.3f}\n",
      worst);
  return 0;
}
