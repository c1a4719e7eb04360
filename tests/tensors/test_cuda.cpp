// Tests for the CUDA path (tensors/cuda/, cuda_memory.h): device detection, host<->device round
// trips, every kernel of the table against the CPU kernel on random data, and the caching
// allocator. Without a GPU each case WARNs "no CUDA device: skipped" and returns.
#include <catch2/catch.hpp>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "tensors/backend.h"
#include "tensors/cuda_memory.h"
#include "tensors/tensors.h"

namespace tp = tensorplay;

namespace {

/// True (after a visible warning) when there is no CUDA device to test on.
bool skip_without_gpu() {
  if (tp::cuda_available()) return false;
  WARN("no CUDA device: skipped ("
       << (tp::cuda_built() ? "CUDA built in, no GPU present" : "built without CUDA") << ")");
  return true;
}

const tp::Backend& cpu_kernels() { return tp::backend_for(tp::cpu()); }
const tp::Backend& gpu_kernels() { return tp::backend_for(tp::Device("cuda:0")); }

std::vector<float> random_values(int64_t n, float low, float high, uint64_t seed) {
  tp::Generator g(seed);
  return tp::rand_uniform({n}, low, high, {}, &g).to_vector();
}

/// Host and device copies of the same values.
struct Pair {
  tp::Tensor host, device;
  static Pair of(const std::vector<float>& values) {
    tp::Tensor h = tp::from_vector(values, {static_cast<int64_t>(values.size())});
    return {h, h.to("cuda:0")};
  }
  static Pair empty(int64_t n) {
    return {tp::zeros({n}), tp::zeros({n}, {.device = tp::Device("cuda:0")})};
  }
  float* h() const { return host.data<float>(); }
  float* d() const { return device.data<float>(); }
};

/// Every element within atol + rtol * |expected|; reports the first mismatch.
void check_close(const tp::Tensor& device_result, const tp::Tensor& host_result, float rtol,
                 float atol, const std::string& what) {
  std::vector<float> got = device_result.to_vector();
  std::vector<float> want = host_result.to_vector();
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    bool both_nan = std::isnan(got[i]) && std::isnan(want[i]);
    if (!both_nan && !(std::fabs(got[i] - want[i]) <= atol + rtol * std::fabs(want[i]))) {
      FAIL(what << ": element " << i << " is " << got[i] << " on CUDA, " << want[i] << " on CPU");
    }
  }
  SUCCEED(what);
}

}  // namespace

TEST_CASE("cuda: build flag and device count agree", "[cuda]") {
#ifdef TENSORPLAY_WITH_CUDA
  CHECK(tp::cuda_built());
#else
  CHECK_FALSE(tp::cuda_built());
#endif
  int count = tp::cuda_device_count();
  CHECK(count >= 0);
  CHECK(tp::cuda_available() == (count > 0));
  if (!tp::cuda_built()) CHECK(count == 0);
  if (count == 0) {
    // Without a device every CUDA figure is zero and asking for device memory is a clear error.
    CHECK(tp::cuda_memory_stats(0).malloc_calls == 0);
    CHECK_NOTHROW(tp::cuda_empty_cache());
    CHECK_THROWS_AS(tp::zeros({2}, {.device = tp::Device("cuda:0")}), std::exception);
    WARN("no CUDA device: device cases below are skipped");
    return;
  }
  CHECK_THROWS_WITH(tp::zeros({2}, {.device = tp::Device(tp::DeviceType::CUDA, count)}),
                    Catch::Contains("not a usable device"));
}

TEST_CASE("cuda: host <-> device round trips keep every bit", "[cuda]") {
  if (skip_without_gpu()) return;
  std::vector<float> values = random_values(1000, -3, 3, 1);
  values[0] = INFINITY;
  values[1] = -0.0f;
  tp::Tensor h = tp::from_vector(values, {10, 100});
  tp::Tensor d = h.to("cuda:0");
  CHECK(d.is_cuda());
  CHECK(d.shape() == h.shape());
  CHECK(d.cpu().to_vector() == values);
  CHECK(d.clone().cpu().to_vector() == values);                           // device -> device
  CHECK(d.slice0(2, 4).cpu().to_vector() == h.slice0(2, 4).to_vector());  // offset views
  CHECK(tp::zeros({0}, {.device = tp::Device("cuda:0")}).cpu().numel() == 0);

  // bfloat16 conversion on the device matches the host conversion bit for bit.
  tp::Tensor bf_host = h.to(tp::DType::BFloat16);
  tp::Tensor bf_device = d.to(tp::DType::BFloat16);
  std::vector<uint16_t> a(bf_host.data<uint16_t>(), bf_host.data<uint16_t>() + 1000);
  tp::Tensor bf_back = bf_device.cpu();
  std::vector<uint16_t> b(bf_back.data<uint16_t>(), bf_back.data<uint16_t>() + 1000);
  CHECK(a == b);
  CHECK(bf_device.to(tp::DType::Float32).cpu().to_vector() ==
        bf_host.to(tp::DType::Float32).to_vector());

  tp::Tensor filled = tp::full({7}, 2.5f, {.device = tp::Device("cuda:0")});
  CHECK(filled.cpu().to_vector() == std::vector<float>(7, 2.5f));
  filled.zero_();
  CHECK(filled.cpu().to_vector() == std::vector<float>(7, 0.0f));

  if (tp::cuda_device_count() >= 2) {
    tp::Tensor peer = d.to("cuda:1");
    CHECK(peer.device() == tp::Device("cuda:1"));
    CHECK(peer.cpu().to_vector() == values);
    CHECK(peer.to("cuda:0").cpu().to_vector() == values);
  } else {
    WARN("one CUDA device: peer copies skipped");
  }
}

TEST_CASE("cuda: unary kernels and derivatives match the CPU", "[cuda]") {
  if (skip_without_gpu()) return;
  const int64_t n = 10007;
  for (tp::UnaryOp op :
       {tp::UnaryOp::Relu, tp::UnaryOp::Gelu, tp::UnaryOp::Tanh, tp::UnaryOp::Exp, tp::UnaryOp::Log,
        tp::UnaryOp::Neg, tp::UnaryOp::Sqrt, tp::UnaryOp::Square}) {
    bool positive = op == tp::UnaryOp::Log || op == tp::UnaryOp::Sqrt;
    Pair x = Pair::of(random_values(n, positive ? 0.1f : -4.0f, 4.0f, 2));
    Pair gy = Pair::of(random_values(n, -1, 1, 3));
    Pair y = Pair::empty(n), gx = Pair::empty(n);
    cpu_kernels().unary(op, x.h(), y.h(), n);
    gpu_kernels().unary(op, x.d(), y.d(), n);
    std::string name = "unary op " + std::to_string(static_cast<int>(op));
    check_close(y.device, y.host, 1e-5f, 1e-6f, name);
    cpu_kernels().unary_backward(op, x.h(), y.h(), gy.h(), gx.h(), n);
    gpu_kernels().unary_backward(op, x.d(), y.d(), gy.d(), gx.d(), n);
    check_close(gx.device, gx.host, 1e-5f, 1e-6f, name + " backward");
  }
}

TEST_CASE("cuda: binary kernels broadcast like the CPU", "[cuda]") {
  if (skip_without_gpu()) return;
  struct Case {
    tp::Shape a, b;
  };
  std::vector<Case> cases = {{{64, 33}, {64, 33}},
                             {{64, 33}, {33}},
                             {{64, 33}, {64, 1}},
                             {{5, 1, 7}, {1, 6, 1}},
                             {{3, 4, 5, 6}, {}},
                             {{}, {3, 4, 5, 6}},
                             {{2, 1, 3, 1, 2, 1, 2, 2}, {2, 3, 2, 1, 2, 2}}};
  for (const Case& c : cases) {
    tp::Tensor a = tp::randn(c.a), b = tp::rand_uniform(c.b, 0.5f, 2.0f);
    for (auto [op, f] :
         std::vector<std::pair<const char*, tp::Tensor (*)(const tp::Tensor&, const tp::Tensor&)>>{
             {"add", tp::add}, {"sub", tp::sub}, {"mul", tp::mul}, {"div", tp::div}}) {
      tp::Tensor want = f(a, b);
      tp::Tensor got = f(a.to("cuda:0"), b.to("cuda:0"));
      CHECK(got.shape() == want.shape());
      check_close(got, want, 1e-6f, 0.0f,
                  std::string(op) + " " + tp::to_string(c.a) + " with " + tp::to_string(c.b));
    }
  }
  Pair x = Pair::of(random_values(999, -2, 2, 4));
  Pair out = Pair::empty(999);
  cpu_kernels().affine(x.h(), out.h(), 999, 1.5f, -0.25f);
  gpu_kernels().affine(x.d(), out.d(), 999, 1.5f, -0.25f);
  check_close(out.device, out.host, 1e-6f, 0.0f, "affine");
}

TEST_CASE("cuda: sum_dim matches the CPU on every layout", "[cuda]") {
  if (skip_without_gpu()) return;
  struct Case {
    int64_t outer, reduce, inner;
  };
  for (Case c : std::vector<Case>{{1, 100000, 1},
                                  {300, 513, 1},
                                  {7, 3, 1},
                                  {4, 200, 129},
                                  {1, 1000, 64},
                                  {64, 1, 33},
                                  {2, 0, 5}}) {
    int64_t n = c.outer * c.reduce * c.inner;
    Pair x = Pair::of(random_values(n, -1, 1, 5));
    Pair out = Pair::empty(c.outer * c.inner);
    cpu_kernels().sum_dim(x.h(), out.h(), c.outer, c.reduce, c.inner);
    gpu_kernels().sum_dim(x.d(), out.d(), c.outer, c.reduce, c.inner);
    check_close(out.device, out.host, 1e-4f, 1e-4f,
                "sum_dim " + std::to_string(c.outer) + "x" + std::to_string(c.reduce) + "x" +
                    std::to_string(c.inner));
  }
}

TEST_CASE("cuda: gemm and gemm_batched through cuBLAS match the CPU", "[cuda]") {
  if (skip_without_gpu()) return;
  const int64_t m = 37, n = 53, k = 29, pad = 3, batch = 4;
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      int64_t lda = (ta ? m : k) + pad, ldb = (tb ? k : n) + pad, ldc = n + pad;
      int64_t rows_a = ta ? k : m, rows_b = tb ? n : k;
      Pair a = Pair::of(random_values(batch * rows_a * lda, -1, 1, 6));
      Pair b = Pair::of(random_values(rows_b * ldb, -1, 1, 7));  // one B broadcast (stride 0)
      Pair c = Pair::of(random_values(batch * m * ldc, -1, 1, 8));
      std::string name = std::string("gemm ta=") + (ta ? "T" : "N") + " tb=" + (tb ? "T" : "N");
      cpu_kernels().gemm(ta, tb, m, n, k, 0.5f, a.h(), lda, b.h(), ldb, 2.0f, c.h(), ldc);
      gpu_kernels().gemm(ta, tb, m, n, k, 0.5f, a.d(), lda, b.d(), ldb, 2.0f, c.d(), ldc);
      check_close(c.device, c.host, 1e-4f, 1e-4f, name);
      cpu_kernels().gemm_batched(ta, tb, batch, m, n, k, 1.0f, a.h(), lda, rows_a * lda, b.h(), ldb,
                                 0, 0.0f, c.h(), ldc, m * ldc);
      gpu_kernels().gemm_batched(ta, tb, batch, m, n, k, 1.0f, a.d(), lda, rows_a * lda, b.d(), ldb,
                                 0, 0.0f, c.d(), ldc, m * ldc);
      check_close(c.device, c.host, 1e-4f, 1e-4f, name + " batched");
    }
  }
  // k == 0: C = beta * C, and beta == 0 clears C even where it held NaN.
  Pair c = Pair::of(std::vector<float>(6, NAN));
  gpu_kernels().gemm(false, false, 2, 3, 0, 1.0f, c.d(), 1, c.d(), 3, 0.0f, c.d(), 3);
  CHECK(c.device.cpu().to_vector() == std::vector<float>(6, 0.0f));
}

TEST_CASE("cuda: a linear layer trains to the same values as on the CPU", "[cuda]") {
  if (skip_without_gpu()) return;
  tp::manual_seed(11);
  tp::Tensor w = tp::randn({16, 32}), bias = tp::randn({16});
  tp::Tensor x = tp::randn({8, 32}), target = tp::randn({8, 16});
  auto run = [&](tp::Device device) {
    tp::Tensor wd = w.to(device).detach().set_requires_grad(true);
    tp::Tensor bd = bias.to(device).detach().set_requires_grad(true);
    tp::Tensor loss = tp::mse_loss(tp::gelu(tp::linear(x.to(device), wd, bd)), target.to(device));
    loss.backward();
    return std::vector<tp::Tensor>{loss, wd.grad(), bd.grad()};
  };
  auto cpu = run(tp::cpu());
  auto gpu = run(tp::Device("cuda:0"));
  check_close(gpu[0], cpu[0], 1e-5f, 1e-6f, "loss");
  check_close(gpu[1], cpu[1], 1e-4f, 1e-5f, "weight gradient");
  check_close(gpu[2], cpu[2], 1e-4f, 1e-5f, "bias gradient");
}

TEST_CASE("cuda: the caching allocator reuses blocks in steady state", "[cuda]") {
  if (skip_without_gpu()) return;
  tp::Device dev("cuda:0");
  tp::manual_seed(12);
  tp::Tensor w = tp::randn({64, 64}, {.device = dev}).set_requires_grad(true);
  tp::Tensor x = tp::randn({32, 64}, {.device = dev});
  tp::optim::SGD opt({w}, {.lr = 0.01f});
  auto step = [&] {
    tp::Tensor loss = tp::mse_loss(tp::relu(tp::linear(x, w)), x);
    loss.backward();
    opt.step();
    opt.zero_grad();
  };
  step();  // warm-up fills the cache
  step();
  tp::CudaMemoryStats before = tp::cuda_memory_stats(0);
  for (int i = 0; i < 5; ++i) step();
  tp::CudaMemoryStats after = tp::cuda_memory_stats(0);
  CHECK(after.malloc_calls == before.malloc_calls);
  CHECK(after.cache_hits > before.cache_hits);
  CHECK(after.allocated_bytes == before.allocated_bytes);

  // Size classes: 1000 bytes take a 1024-byte block; freeing keeps it cached until empty_cache.
  size_t held = tp::cuda_memory_stats(0).allocated_bytes;
  {
    tp::Tensor t = tp::empty({250}, {.device = dev});
    CHECK(tp::cuda_memory_stats(0).allocated_bytes == held + 1024);
  }
  CHECK(tp::cuda_memory_stats(0).allocated_bytes == held);
  CHECK(tp::cuda_memory_stats(0).cached_bytes > 0);
  tp::cuda_empty_cache();
  CHECK(tp::cuda_memory_stats(0).cached_bytes == 0);
  CHECK(tp::cuda_memory_stats(0).free_calls > 0);
}
