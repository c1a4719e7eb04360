// CUDA kernel benchmark: cuBLAS float32 and bfloat16 gemm throughput, host<->device copy bandwidth,
// elementwise and softmax bandwidth, and one MLP training step in float32 and in bfloat16 (with
// the cudaMalloc count in steady state).
// Prints one JSON line per figure and a last line {"bench": "cuda_kernels", ...} with all of them;
// without a GPU it prints a "skipped" line and exits 0.
#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "tensorplay/core/backend.h"
#include "tensorplay/tensor.h"

namespace tp = tensorplay;

namespace {

/// Median-free simple timing: `warmup` untimed runs, then the mean of `reps` runs, in seconds.
double time_it(const std::function<void()>& f, int warmup, int reps) {
  const tp::Backend& cuda = tp::backend_for(tp::Device("cuda:0"));
  for (int i = 0; i < warmup; ++i) f();
  cuda.synchronize();
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < reps; ++i) f();
  cuda.synchronize();
  std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
  return elapsed.count() / reps;
}

struct Figures {
  std::string json;
  void add(const std::string& key, double value) {
    char buf[128];
    std::snprintf(buf, sizeof buf, "%s\"%s\": %.3f", json.empty() ? "" : ", ", key.c_str(), value);
    json += buf;
    std::printf("{\"figure\": \"%s\", \"value\": %.3f}\n", key.c_str(), value);
    std::fflush(stdout);
  }
};

}  // namespace

int main() {
  if (!tp::cuda_available()) {
    std::printf("{\"bench\": \"cuda_kernels\", \"skipped\": \"no CUDA device\"}\n");
    return 0;
  }
  tp::Device dev("cuda:0");
  const tp::Backend& cuda = tp::backend_for(dev);
  Figures fig;

  // cuBLAS sgemm, 4096^3 (float32, no TF32 unless TENSORPLAY_CUDA_TF32=1).
  {
    const int64_t n = 4096;
    tp::Tensor a = tp::randn({n, n}).to(dev), b = tp::randn({n, n}).to(dev);
    tp::Tensor c = tp::empty({n, n}, {.device = dev});
    double s = time_it(
        [&] {
          cuda.gemm(false, false, n, n, n, 1.0f, a.data<float>(), n, b.data<float>(), n, 0.0f,
                    c.data<float>(), n);
        },
        2, 10);
    fig.add("sgemm_4096_tflops", 2.0 * n * n * n / s / 1e12);
  }

  // cuBLAS bfloat16 gemm with float32 accumulation, 4096^3 (tensor cores).
  {
    const int64_t n = 4096;
    tp::Tensor a = tp::randn({n, n}).to(dev).to(tp::DType::BFloat16);
    tp::Tensor b = tp::randn({n, n}).to(dev).to(tp::DType::BFloat16);
    tp::Tensor c = tp::empty({n, n}, {.dtype = tp::DType::BFloat16, .device = dev});
    double s = time_it(
        [&] {
          cuda.gemm_batched_bf16(false, false, 1, n, n, n, 1.0f, a.data<uint16_t>(), n, 0,
                                 b.data<uint16_t>(), n, 0, 0.0f, c.data<uint16_t>(), n, 0);
        },
        2, 10);
    fig.add("bf16_gemm_4096_tflops", 2.0 * n * n * n / s / 1e12);
  }

  // Host <-> device copies of 256 MiB of pageable host memory.
  {
    const int64_t n = 64 << 20;
    tp::Tensor host = tp::ones({n});
    tp::Tensor device = tp::empty({n}, {.device = dev});
    double h2d = time_it([&] { device.copy_(host); }, 1, 5);
    double d2h = time_it([&] { host.copy_(device); }, 1, 5);
    fig.add("h2d_gbps", n * 4.0 / h2d / 1e9);
    fig.add("d2h_gbps", n * 4.0 / d2h / 1e9);
  }

  // Elementwise add (read 2, write 1) and row softmax (read 1, write 1) on 64M floats.
  {
    const int64_t n = 64 << 20;
    tp::Tensor a = tp::ones({n}, {.device = dev}), b = tp::ones({n}, {.device = dev});
    tp::Tensor out = tp::empty({n}, {.device = dev});
    int64_t shape[] = {n}, stride[] = {1};
    double add = time_it(
        [&] {
          cuda.binary(tp::BinaryOp::Add, a.data<float>(), stride, b.data<float>(), stride,
                      out.data<float>(), shape, 1);
        },
        2, 20);
    fig.add("add_gbps", n * 12.0 / add / 1e9);
    double softmax = time_it(
        [&] { cuda.softmax(a.data<float>(), out.data<float>(), n / 1024, 1024, 1, false); }, 2, 20);
    fig.add("softmax_rows1024_gbps", n * 8.0 / softmax / 1e9);
  }

  // One training step of a 4-layer MLP (width 2048, batch 1024): forward, backward, SGD; in float32
  // and with bfloat16 weights and activations.
  for (tp::DType dtype : {tp::DType::Float32, tp::DType::BFloat16}) {
    const int64_t width = 2048, batch = 1024;
    const std::string prefix = dtype == tp::DType::Float32 ? "mlp_step" : "mlp_step_bf16";
    tp::manual_seed(0);
    std::vector<tp::Tensor> weights;
    for (int i = 0; i < 4; ++i)
      weights.push_back(
          (tp::randn({width, width}) * 0.02f).to(dev).to(dtype).detach().set_requires_grad(true));
    tp::Tensor x = tp::randn({batch, width}).to(dev).to(dtype);
    tp::Tensor y = tp::randn({batch, width}).to(dev).to(dtype);
    tp::optim::SGD opt(weights, {.lr = 1e-3f});
    auto step = [&] {
      tp::Tensor h = x;
      for (auto& w : weights) h = tp::gelu(tp::linear(h, w));
      tp::mse_loss(h, y).backward();
      opt.step();
      opt.zero_grad();
    };
    step();
    int64_t mallocs_before = tp::cuda_memory_stats(0).malloc_calls;
    double s = time_it(step, 1, 10);
    fig.add(prefix + "_ms", s * 1e3);
    fig.add(prefix + "_tflops", 3.0 * 2.0 * batch * width * width * 4 / s / 1e12);
    fig.add(prefix + "_steady_state_mallocs",
            static_cast<double>(tp::cuda_memory_stats(0).malloc_calls - mallocs_before));
  }
  fig.add("peak_allocated_mib", tp::cuda_memory_stats(0).peak_allocated_bytes / 1048576.0);

  std::printf("{\"bench\": \"cuda_kernels\", %s}\n", fig.json.c_str());
  return 0;
}
