// Tests for fsdp/mixed_precision.h: float32 master weights with bfloat16 compute on one rank,
// against the float32 run.
#include <catch2/catch.hpp>
#include <cmath>

#include "tensorplay/distributed/fsdp/mixed_precision.h"
#include "tensorplay/nn.h"
#include "tensorplay/optim.h"
#include "tensorplay/tensor.h"

namespace tp = tensorplay;
namespace fsdp = tensorplay::distributed::fsdp;

namespace {

tp::Tensor wave(const tp::Shape& shape, float scale) {
  std::vector<float> v(static_cast<size_t>(tp::numel(shape)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = std::sin(scale * static_cast<float>(i));
  return tp::from_vector(v, shape);
}

struct Seen {
  std::vector<float> losses;
  tp::DType param_dtype = tp::DType::BFloat16, grad_dtype = tp::DType::BFloat16;
};

Seen train(const tp::StateDict& init, bool bf16) {
  tp::nn::Sequential net(tp::nn::Linear(6, 16), tp::nn::ReLU(), tp::nn::Linear(16, 2));
  net->load_state_dict(init);
  if (bf16) fsdp::mixed_precision(net, {.param_dtype = tp::DType::BFloat16});
  tp::optim::AdamW opt(net->parameters(), {.lr = 2e-2f});
  const tp::Tensor x = wave({16, 6}, 0.3f);
  std::vector<float> xs = x.to_vector(), ys;
  for (int i = 0; i < 16; ++i)
    ys.insert(ys.end(), {xs[6 * i] - xs[6 * i + 1], 0.5f * xs[6 * i + 2]});
  const tp::Tensor y = tp::from_vector(ys, {16, 2});  // a function of x the MLP can learn
  Seen seen;
  for (int step = 0; step < 10; ++step) {
    opt.zero_grad();
    tp::Tensor loss = tp::mse_loss(net(x).to(tp::DType::Float32), y);
    loss.backward();
    seen.losses.push_back(loss.item());
    seen.grad_dtype = net->parameters()[0].grad().dtype();
    opt.step();
  }
  seen.param_dtype = net->parameters()[0].dtype();
  return seen;
}

}  // namespace

TEST_CASE("mixed_precision computes in bfloat16 on float32 master weights",
          "[fsdp][mixed_precision]") {
  tp::nn::Sequential shape_of(tp::nn::Linear(6, 16), tp::nn::ReLU(), tp::nn::Linear(16, 2));
  tp::StateDict init;
  for (auto& [name, t] : shape_of->state_dict()) init.insert(name, t.clone().detach());
  const Seen f32 = train(init, false), bf16 = train(init, true);
  CHECK(bf16.param_dtype == tp::DType::Float32);  // master weights between steps
  CHECK(bf16.grad_dtype == tp::DType::Float32);   // gradients back in the master dtype
  CHECK(bf16.losses.back() < 0.8f * bf16.losses.front());
  for (size_t s = 0; s < f32.losses.size(); ++s) {
    INFO("step " << s);
    // bfloat16 keeps 8 bits of mantissa: within 2% (and 1e-4) of the float32 run's loss.
    CHECK(std::abs(bf16.losses[s] - f32.losses[s]) <= 0.02f * f32.losses[s] + 1e-4f);
  }
}
