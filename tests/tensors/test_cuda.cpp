// Tests for the CUDA path (tensors/cuda/, cuda_memory.h): device detection, host<->device round
// trips, ops with autograd on CUDA against the CPU, and the caching allocator. Without a GPU each
// case WARNs "no CUDA device: skipped" and returns.
#include <catch2/catch.hpp>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "cuda_test_support.h"
#include "tensorplay/base/knobs.h"
#include "tensorplay/core/core_knobs.h"
#include "tensorplay/core/cuda_memory.h"
#include "tensorplay/tensor.h"

namespace tp = tensorplay;

using namespace cuda_test;  // NOLINT(google-build-using-namespace): test helpers

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

TEST_CASE("cuda: the first CUDA call leaves CUDA_DEVICE_MAX_CONNECTIONS set", "[cuda_env]") {
  // Set before CUDA makes its context when unset (32: a hardware queue for every stream of an
  // NCCL channel of up to 8 ranks); a value of the user's stays. Needs no device.
  tp::cuda_device_count();
  if (!tp::cuda_built()) {
    CHECK(tp::cuda_device_count() == 0);
    return;
  }
  CHECK(tp::knob_is_set(tp::kCudaDeviceMaxConnectionsKnob));
  const int64_t queues = tp::knob_int(tp::kCudaDeviceMaxConnectionsKnob);
  CHECK(queues >= 1);
  CHECK(queues <= 32);
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
}

// Needs two GPUs ([multi_gpu]: the GPU check runs it only where there are two).
TEST_CASE("cuda: copies between two devices keep every bit", "[cuda][multi_gpu]") {
  if (skip_without_gpu()) return;
  if (tp::cuda_device_count() < 2) {
    WARN("one CUDA device: peer copies skipped");
    return;
  }
  std::vector<float> values = random_values(1000, -3, 3, 1);
  tp::Tensor d = tp::from_vector(values, {10, 100}).to("cuda:0");
  tp::Tensor peer = d.to("cuda:1");
  CHECK(peer.device() == tp::Device("cuda:1"));
  CHECK(peer.cpu().to_vector() == values);
  CHECK(peer.to("cuda:0").cpu().to_vector() == values);
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

namespace {

/// Runs `f` on CPU copies and on CUDA copies of `inputs` (leaves needing gradients where
/// `needs_grad`), back-propagates the same random output gradient, and compares outputs and every
/// input gradient.
void compare_op(const std::string& name, const std::vector<tp::Tensor>& inputs,
                const std::vector<bool>& needs_grad,
                const std::function<tp::Tensor(const std::vector<tp::Tensor>&)>& f, float rtol,
                float atol) {
  auto run = [&](tp::Device device, const tp::Tensor& grad) {
    std::vector<tp::Tensor> leaves;
    for (size_t i = 0; i < inputs.size(); ++i) {
      tp::Tensor leaf = inputs[i].to(device).detach();
      if (needs_grad[i]) leaf.set_requires_grad(true);
      leaves.push_back(leaf);
    }
    tp::Tensor out = f(leaves);
    std::vector<tp::Tensor> results{out};
    if (grad.defined()) {
      out.backward(grad.to(device));
      for (size_t i = 0; i < leaves.size(); ++i)
        if (needs_grad[i]) results.push_back(leaves[i].grad());
    }
    return results;
  };
  tp::Tensor shape_probe = run(tp::cpu(), tp::Tensor())[0];
  tp::Generator g(99);
  tp::Tensor grad = tp::randn(shape_probe.shape(), {}, &g);
  auto cpu = run(tp::cpu(), grad);
  auto gpu = run(tp::Device("cuda:0"), grad);
  REQUIRE(gpu.size() == cpu.size());
  CHECK(gpu[0].is_cuda());
  check_close(gpu[0], cpu[0], rtol, atol, name);
  for (size_t i = 1; i < cpu.size(); ++i)
    check_close(gpu[i], cpu[i], rtol, atol, name + " gradient " + std::to_string(i));
}

}  // namespace

TEST_CASE("cuda: nn ops with autograd match the CPU", "[cuda]") {
  if (skip_without_gpu()) return;
  tp::manual_seed(13);
  tp::Tensor x = tp::randn({4, 6, 32});
  compare_op(
      "softmax", {x}, {true}, [](auto& in) { return tp::softmax(in[0], -1); }, 1e-5f, 1e-6f);
  compare_op(
      "log_softmax dim 1", {x}, {true}, [](auto& in) { return tp::log_softmax(in[0], 1); }, 1e-5f,
      1e-6f);
  compare_op(
      "sigmoid", {x}, {true}, [](auto& in) { return tp::sigmoid(in[0]); }, 1e-5f, 1e-6f);
  compare_op(
      "layer_norm", {x, tp::randn({32}), tp::randn({32})}, {true, true, true},
      [](auto& in) { return tp::layer_norm(in[0], 32, in[1], in[2]); }, 1e-4f, 1e-4f);
  compare_op(
      "permute", {x}, {true},
      [](auto& in) {
        return tp::permute(in[0], {2, 0, 1});
      },
      0.0f, 0.0f);
  compare_op(
      "transpose", {x}, {true}, [](auto& in) { return tp::transpose(in[0], 1, 2); }, 0.0f, 0.0f);
  compare_op(
      "cat and split", {x, tp::randn({4, 3, 32})}, {true, true},
      [](auto& in) {
        tp::Tensor c = tp::cat({in[0], in[1]}, 1);
        return tp::split(c, 4, 1)[1];
      },
      0.0f, 0.0f);
  compare_op(
      "bmm", {x, tp::randn({4, 32, 5})}, {true, true},
      [](auto& in) { return tp::bmm(in[0], in[1]); }, 1e-4f, 1e-4f);
  tp::Tensor q = tp::randn({2, 3, 16, 8}), k = tp::randn({2, 3, 16, 8}),
             v = tp::randn({2, 3, 16, 8});
  for (bool causal : {false, true}) {
    compare_op(
        causal ? "causal attention" : "attention", {q, k, v}, {true, true, true},
        [causal](auto& in) {
          return tp::scaled_dot_product_attention(in[0], in[1], in[2], causal);
        },
        1e-4f, 1e-4f);
  }
  tp::Tensor ids = tp::from_vector({1, 4, 4, 0, 9, 2}, {2, 3});
  compare_op(
      "embedding", {ids, tp::randn({10, 8})}, {false, true},
      [](auto& in) { return tp::embedding(in[0], in[1]); }, 0.0f, 0.0f);
  tp::Tensor targets = tp::from_vector({3, -100, 0, 9, 9}, {5});
  compare_op(
      "cross_entropy", {tp::randn({5, 10}), targets}, {true, false},
      [](auto& in) { return tp::cross_entropy(in[0], in[1]); }, 1e-5f, 1e-6f);
  compare_op(
      "dropout", {x}, {true},
      [](auto& in) {
        tp::Generator g(5);
        return tp::dropout(in[0], 0.3f, true, &g);
      },
      0.0f, 0.0f);
}

TEST_CASE("cuda: input-then-weight backward equals full backward bit for bit", "[cuda]") {
  if (skip_without_gpu()) return;
  tp::Device dev("cuda:0");
  tp::Generator g(14);
  std::vector<tp::Tensor> params = {tp::randn({32, 16}, {}, &g), tp::randn({32}, {}, &g),
                                    tp::randn({32}, {}, &g), tp::randn({32}, {}, &g)};
  tp::Tensor x = tp::randn({8, 16}, {}, &g), gy = tp::randn({8, 32}, {}, &g).to(dev);
  auto run = [&](bool split) {
    std::vector<tp::Tensor> p;
    for (const auto& t : params) p.push_back(t.to(dev).detach().requires_grad_());
    tp::Tensor in = x.to(dev).detach().requires_grad_();
    tp::Tensor y = tp::gelu(tp::layer_norm(tp::linear(in, p[0], p[1]), 32, p[2], p[3]));
    if (split) {
      auto stash = tp::autograd::backward_input({y}, {gy}, {in});
      tp::autograd::backward_weight(std::move(stash));
    } else {
      tp::autograd::backward({y}, {gy});
    }
    std::vector<std::vector<float>> grads{in.grad().to_vector()};
    for (const auto& t : p) grads.push_back(t.grad().to_vector());
    return grads;
  };
  auto full = run(false);
  auto split = run(true);
  REQUIRE(full.size() == split.size());
  for (size_t i = 0; i < full.size(); ++i) CHECK(split[i] == full[i]);
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
