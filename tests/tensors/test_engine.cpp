// Tests for autograd/engine.h: full backward, and split backward (I then W) equal to it bit for
// bit.
#include <catch2/catch.hpp>

#include "tensorplay/core/memory_accounting.h"
#include "tensorplay/tensor.h"

namespace tp = tensorplay;

namespace {

struct TwoLayer {
  tp::Tensor w1, b1, w2, b2;
  explicit TwoLayer(uint64_t seed) {
    tp::Generator g(seed);
    w1 = tp::randn({6, 4}, {}, &g).requires_grad_();
    b1 = tp::randn({6}, {}, &g).requires_grad_();
    w2 = tp::randn({3, 6}, {}, &g).requires_grad_();
    b2 = tp::randn({3}, {}, &g).requires_grad_();
  }
  tp::Tensor forward(const tp::Tensor& x) const {
    return tp::linear(tp::relu(tp::linear(x, w1, b1)), w2, b2);
  }
  std::vector<tp::Tensor> params() const { return {w1, b1, w2, b2}; }
};

}  // namespace

TEST_CASE("full backward accumulates into leaves", "[engine]") {
  tp::Tensor a = tp::from_vector({1, 2, 3}, {3}).requires_grad_();
  tp::Tensor b = tp::from_vector({4, 5, 6}, {3}).requires_grad_();
  tp::Tensor loss = tp::sum(a * b + a);
  loss.backward();
  CHECK(a.grad().to_vector() == std::vector<float>{5, 6, 7});
  CHECK(b.grad().to_vector() == std::vector<float>{1, 2, 3});
  tp::sum(a * b).backward();  // second backward accumulates
  CHECK(a.grad().to_vector() == std::vector<float>{9, 11, 13});
}

TEST_CASE("backward on a non-scalar without a gradient is an error", "[engine]") {
  tp::Tensor a = tp::ones({2, 2}).requires_grad_();
  tp::Tensor y = a * 2.0f;
  CHECK_THROWS_WITH(y.backward(), Catch::Contains("scalar"));
}

TEST_CASE("backward through a tensor without history is an error", "[engine]") {
  tp::Tensor a = tp::ones({1});
  CHECK_THROWS_WITH(a.backward(), Catch::Contains("does not require grad"));
}

TEST_CASE("input-only then weight-only backward equals full backward bit for bit", "[engine]") {
  TwoLayer full(7), split(7);
  tp::Tensor x = tp::randn({5, 4});
  tp::Tensor gy = tp::randn({5, 3});

  tp::Tensor x_full = x.detach().requires_grad_();
  tp::autograd::backward({full.forward(x_full)}, {gy});

  tp::Tensor x_split = x.detach().requires_grad_();
  auto stash = tp::autograd::backward_input({split.forward(x_split)}, {gy}, {x_split});
  REQUIRE(x_split.grad().defined());
  for (const auto& p : split.params()) CHECK_FALSE(p.grad().defined());  // W not run yet
  CHECK(stash.size() == 2);  // the two linear nodes owe weight gradients
  tp::autograd::backward_weight(std::move(stash));

  CHECK(x_split.grad().to_vector() == x_full.grad().to_vector());
  for (size_t i = 0; i < full.params().size(); ++i)
    CHECK(split.params()[i].grad().to_vector() == full.params()[i].grad().to_vector());
}

TEST_CASE("with all weight gradients at once, I adds each to .grad as computed: the same bits",
          "[engine]") {
  TwoLayer full(7), split(7);
  tp::Tensor gy = tp::randn({64, 3});
  std::vector<tp::Tensor> xs = {tp::randn({64, 4}), tp::randn({64, 4})};
  for (const tp::Tensor& x : xs)  // two microbatches: the second adds to the first's .grad
    tp::autograd::backward({full.forward(x.detach().requires_grad_())}, {gy});

  for (const tp::Tensor& x : xs) {
    tp::Tensor in = x.detach().requires_grad_();
    tp::Tensor out = split.forward(in);
    auto stash = tp::autograd::backward_input({out}, {gy}, {in}, true);
    // Every weight's gradient went along a leaf edge into .grad during I: nothing is owed to W.
    CHECK(stash.empty());
    for (const auto& p : split.params()) CHECK(p.grad().defined());
    tp::autograd::backward_weight(std::move(stash));
  }
  for (size_t i = 0; i < full.params().size(); ++i)
    CHECK(split.params()[i].grad().to_vector() == full.params()[i].grad().to_vector());
}

TEST_CASE("with all weight gradients at once, I holds one weight's gradient at a time",
          "[engine]") {
  // Wide weights, few rows: the weights' gradients outweigh the activations, as on a stage of
  // wide blocks. Kept until I's end, they would all be held at once on top of the graph.
  tp::Generator g(9);
  std::vector<tp::Tensor> ws;
  for (int i = 0; i < 4; ++i) ws.push_back(tp::randn({128, 128}, {}, &g).requires_grad_());
  const int64_t weight_bytes = 128 * 128 * 4;
  auto account = std::make_shared<tp::MemoryAccount>();
  for (int mb = 0; mb < 2; ++mb) {  // the second microbatch's gradients are added, not taken
    tp::MemoryScope scope(account);
    tp::Tensor in = tp::randn({2, 128}, {}, &g).requires_grad_();
    tp::Tensor h = in;
    for (const tp::Tensor& w : ws) h = tp::tanh(tp::linear(h, w));
    account->reset_peaks();
    const int64_t at_start = account->current(tp::MemoryKind::Activation);
    auto stash = tp::autograd::backward_input({h}, {tp::ones({2, 128})}, {in}, true);
    const int64_t held = account->peak(tp::MemoryKind::Activation) - at_start;
    INFO("microbatch " << mb << ": I held " << held << " bytes above its start");
    CHECK(held < 2 * weight_bytes);  // all four at once: 4 * weight_bytes
    CHECK(stash.empty());
  }
}

TEST_CASE("a weight used twice gets both contributions in the split backward", "[engine]") {
  tp::Generator g(3);
  tp::Tensor w = tp::randn({4, 4}, {}, &g).requires_grad_();
  tp::Tensor w2 = w.detach().requires_grad_();
  tp::Tensor x = tp::randn({2, 4}, {}, &g);
  auto run = [&](const tp::Tensor& weight, const tp::Tensor& in) {
    return tp::sum(tp::linear(tp::linear(in, weight), weight));
  };
  tp::Tensor x1 = x.detach().requires_grad_();
  run(w, x1).backward();
  tp::Tensor x2 = x.detach().requires_grad_();
  auto stash = tp::autograd::backward_input({run(w2, x2)}, {}, {x2});
  tp::autograd::backward_weight(std::move(stash));
  CHECK(w2.grad().to_vector() == w.grad().to_vector());
  CHECK(x2.grad().to_vector() == x1.grad().to_vector());
}

TEST_CASE("no-grad guard records no history", "[engine]") {
  tp::Tensor a = tp::ones({2}).requires_grad_();
  {
    tp::NoGradGuard guard;
    CHECK_FALSE((a * 2.0f).requires_grad());
  }
  CHECK((a * 2.0f).requires_grad());
}

TEST_CASE("bfloat16 leaves get bfloat16 gradients that accumulate across backwards", "[engine]") {
  tp::Generator g(5);
  tp::Tensor w = tp::randn({3, 4}, {}, &g).to(tp::DType::BFloat16).requires_grad_();
  tp::Tensor x = tp::randn({2, 4}, {}, &g).to(tp::DType::BFloat16);
  tp::Tensor loss = tp::sum(tp::linear(x, w));
  CHECK(loss.dtype() == tp::DType::BFloat16);
  loss.backward();  // the implicit seed takes the root's dtype
  REQUIRE(w.grad().defined());
  CHECK(w.grad().dtype() == tp::DType::BFloat16);
  std::vector<float> once = w.grad().to_vector();
  // d sum(x w^T) / dw[o, i] = sum_r x[r, i], the same for every output row o.
  std::vector<float> xs = x.to_vector();
  for (int64_t o = 0; o < 3; ++o)
    for (int64_t i = 0; i < 4; ++i)
      CHECK(once[o * 4 + i] == Approx(xs[i] + xs[4 + i]).epsilon(1e-2).margin(1e-2));
  tp::sum(tp::linear(x, w)).backward();
  std::vector<float> twice = w.grad().to_vector();
  for (size_t i = 0; i < once.size(); ++i) CHECK(twice[i] == 2 * once[i]);  // doubling is exact
}

TEST_CASE("a float32 output gradient seeds a bfloat16 root", "[engine]") {
  tp::Tensor w = tp::ones({2, 2}).to(tp::DType::BFloat16).requires_grad_();
  tp::Tensor y = tp::matmul(tp::ones({1, 2}).to(tp::DType::BFloat16), w);
  tp::autograd::backward({y}, {tp::from_vector({1.0f, 2.0f}, {1, 2})});
  CHECK(w.grad().dtype() == tp::DType::BFloat16);
  CHECK(w.grad().to_vector() == std::vector<float>{1, 2, 1, 2});
}

TEST_CASE("a second backward through a released graph is an error, not a crash", "[engine]") {
  tp::Tensor x = tp::from_vector({1, -2, 3}, {3}).requires_grad_();
  tp::Tensor loss = tp::sum(tp::relu(x));
  loss.backward();
  CHECK_THROWS_WITH(loss.backward(), Catch::Contains("retain_graph=true"));
}

TEST_CASE("the weight-only backward hands a weight its gradient without copying it", "[engine]") {
  // A 4 MiB weight: copying its new gradient into a fresh .grad costs a pass over it (a third of
  // the W step of a 16-row microbatch) and a second 4 MiB at the peak.
  tp::Tensor w = tp::ones({1024, 1024});
  w.requires_grad_();
  tp::Tensor x = tp::ones({16, 1024});
  x.requires_grad_();
  tp::Tensor y = tp::linear(x, w);
  auto stash = tp::autograd::backward_input({y}, {tp::ones({16, 1024})}, {x});
  const size_t before = tp::host_memory_stats().allocated_bytes;
  tp::host_reset_peak_memory_stats();
  tp::autograd::backward_weight(std::move(stash));
  const size_t peak = tp::host_memory_stats().peak_allocated_bytes - before;
  CHECK(peak < static_cast<size_t>(w.nbytes()) * 3 / 2);  // the gradient once, not twice
  CHECK(w.grad().to_vector()[0] == 16.0f);
}

TEST_CASE("post-accumulate hooks run after each accumulation, in full and split backward",
          "[engine]") {
  TwoLayer net(5);
  tp::Tensor x = tp::randn({2, 4});
  std::vector<std::string> events;
  std::vector<float> seen;
  uint64_t id_w1 = net.w1.register_post_accumulate_grad_hook([&](const tp::Tensor& leaf) {
    events.push_back("w1");
    seen = leaf.grad().to_vector();  // the gradient is already in place
  });
  net.w2.register_post_accumulate_grad_hook([&](const tp::Tensor&) { events.push_back("w2"); });
  tp::sum(net.forward(x)).backward();
  // Backward reaches the last layer first.
  REQUIRE(events.size() == 2);
  CHECK(events[0] == "w2");
  CHECK(events[1] == "w1");
  CHECK(seen == net.w1.grad().to_vector());

  // Split backward: none during I (the weights wait for W), each during W.
  events.clear();
  tp::Tensor in = x.detach().requires_grad_();
  auto stash = tp::autograd::backward_input({tp::sum(net.forward(in))}, {}, {in});
  CHECK(events.empty());
  tp::autograd::backward_weight(std::move(stash));
  CHECK(events.size() == 2);

  net.w1.remove_post_accumulate_grad_hook(id_w1);
  events.clear();
  tp::sum(net.forward(x)).backward();
  CHECK(events == std::vector<std::string>{"w2"});
  // set_grad is not an accumulation.
  net.w2.set_grad(tp::zeros({3, 6}));
  CHECK(events.size() == 1);
  CHECK_THROWS_WITH(
      tp::sum(net.w1 * 2.0f).register_post_accumulate_grad_hook([](const tp::Tensor&) {}),
      Catch::Contains("not a leaf"));
}

TEST_CASE("gradients flowing into one tensor are summed in place, not into a new buffer each",
          "[engine]") {
  // x feeds four products; their gradients meet at x's producer (an identity here), whose
  // running sum the engine alone holds: the sum reuses it. At most three gradients are alive at
  // once (a sum's gradient of x * c, the product's gradient, the running sum), not a fresh sum
  // besides them.
  const int64_t n = 1 << 18;  // 1 MiB of float32 per gradient
  tp::Tensor leaf = tp::ones({n}).requires_grad_(true);
  tp::Tensor x = leaf * 1.0f;
  tp::Tensor loss = tp::sum(x * 2.0f) + tp::sum(x * 3.0f) + tp::sum(x * 4.0f) + tp::sum(x * 5.0f);
  const size_t before = tp::host_memory_stats().allocated_bytes;
  tp::host_reset_peak_memory_stats();
  loss.backward();
  const size_t peak = tp::host_memory_stats().peak_allocated_bytes - before;
  INFO("backward peak " << peak << " bytes over " << before);
  CHECK(peak < 3 * n * sizeof(float) + 4096);
  for (float g : leaf.grad().to_vector()) REQUIRE(g == 14.0f);
}
