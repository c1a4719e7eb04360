// Tests for autograd/checkpoint.h: a checkpointed function gives the values and gradients of the
// plain one bit for bit (full and split backward, dropout, nesting, bfloat16), recomputes once,
// and keeps fewer bytes between forward and backward.
#include <catch2/catch.hpp>
#include <functional>
#include <thread>

#include "tensorplay/tensor.h"

namespace tp = tensorplay;

namespace {

constexpr int64_t kWidth = 8, kHidden = 16;

/// The parameters of a residual block: x + W2 layer_norm(dropout(gelu(W1 x + b1))).
struct Block {
  tp::Tensor w1, b1, gain, w2;
  Block(uint64_t seed, tp::DType dtype = tp::DType::Float32) {
    tp::Generator g(seed);
    w1 = tp::randn({kHidden, kWidth}, {}, &g).to(dtype).requires_grad_();
    b1 = tp::randn({kHidden}, {}, &g).to(dtype).requires_grad_();
    gain = tp::randn({kHidden}, {}, &g).to(dtype).requires_grad_();
    w2 = (tp::randn({kWidth, kHidden}, {}, &g) * 0.3f).to(dtype).requires_grad_();
  }
  tp::Tensor operator()(const tp::Tensor& x, tp::Generator* dropout) const {
    tp::Tensor h = tp::gelu(tp::linear(x, w1, b1));
    h = tp::dropout(h, 0.25f, true, dropout);
    h = tp::layer_norm(h, kHidden, gain);
    return tp::linear(h, w2) + x;
  }
  std::vector<tp::Tensor> params() const { return {w1, b1, gain, w2}; }
};

/// Two blocks, run plainly or each under a checkpoint; counts the block calls.
struct Net {
  Block first, second;
  tp::Generator generator;
  int calls = 0;
  explicit Net(tp::DType dtype = tp::DType::Float32)
      : first(1, dtype), second(2, dtype), generator(99) {}
  tp::Tensor forward(const tp::Tensor& x, bool checkpointed) {
    auto run = [this](const Block& b) {
      return [this, &b](const tp::Tensor& in) {
        ++calls;
        return b(in, &generator);
      };
    };
    if (!checkpointed) return run(second)(run(first)(x));
    tp::Tensor h = tp::checkpoint(run(first), x);
    return tp::checkpoint(run(second), h);
  }
  std::vector<tp::Tensor> params() const {
    std::vector<tp::Tensor> all = first.params();
    for (const auto& p : second.params()) all.push_back(p);
    return all;
  }
};

void check_same_grads(const std::vector<tp::Tensor>& got, const std::vector<tp::Tensor>& want) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("tensor " << i);
    REQUIRE(got[i].grad().defined());
    CHECK(got[i].grad().dtype() == want[i].grad().dtype());
    CHECK(got[i].grad().to_vector() == want[i].grad().to_vector());
  }
}

}  // namespace

TEST_CASE("a checkpointed function gives the plain gradients bit for bit", "[checkpoint]") {
  for (auto dtype : {tp::DType::Float32, tp::DType::BFloat16}) {
    DYNAMIC_SECTION(tp::to_string(dtype)) {
      Net plain(dtype), ckpt(dtype);
      tp::Tensor x = tp::randn({6, kWidth}).to(dtype);
      tp::Tensor xp = x.detach().requires_grad_(), xc = x.detach().requires_grad_();
      tp::Tensor lp = tp::sum(tp::square(plain.forward(xp, false)));
      tp::Tensor lc = tp::sum(tp::square(ckpt.forward(xc, true)));
      CHECK(lc.to_vector() == lp.to_vector());
      CHECK(ckpt.calls == 2);
      lp.backward();
      lc.backward();
      CHECK(ckpt.calls == 4);  // each block recomputed once
      check_same_grads({xc}, {xp});
      check_same_grads(ckpt.params(), plain.params());
      // The recomputation replayed the dropout draws and put the generator back where it was.
      CHECK(ckpt.generator.uniform() == plain.generator.uniform());
    }
  }
}

TEST_CASE("the split backward recomputes once in I and W uses what I kept", "[checkpoint]") {
  for (auto dtype : {tp::DType::Float32, tp::DType::BFloat16}) {
    DYNAMIC_SECTION(tp::to_string(dtype)) {
      Net plain(dtype), ckpt(dtype);
      tp::Tensor x = tp::randn({5, kWidth}).to(dtype);
      tp::Tensor gy = tp::randn({5, kWidth}).to(dtype);
      tp::Tensor xp = x.detach().requires_grad_(), xc = x.detach().requires_grad_();
      tp::autograd::backward({plain.forward(xp, false)}, {gy});

      tp::Tensor out = ckpt.forward(xc, true);
      auto stash = tp::autograd::backward_input({out}, {gy}, {xc});
      CHECK(ckpt.calls == 4);
      REQUIRE(xc.grad().defined());
      for (const auto& p : ckpt.params()) CHECK_FALSE(p.grad().defined());
      tp::autograd::backward_weight(std::move(stash));
      CHECK(ckpt.calls == 4);  // no second recomputation
      check_same_grads({xc}, {xp});
      check_same_grads(ckpt.params(), plain.params());
    }
  }
}

TEST_CASE("under KeepActivationsGuard a checkpoint keeps its activations, the same bits",
          "[checkpoint]") {
  Net plain, ckpt;
  tp::Tensor x = tp::randn({5, kWidth}), gy = tp::randn({5, kWidth});
  tp::Tensor xp = x.detach().requires_grad_(), xc = x.detach().requires_grad_();
  tp::autograd::backward({plain.forward(xp, false)}, {gy});
  tp::Tensor out;
  {
    tp::autograd::KeepActivationsGuard keep;
    out = ckpt.forward(xc, true);
  }
  CHECK_FALSE(tp::autograd::recompute_ahead({out}));  // nothing waits to be rebuilt
  tp::autograd::backward_weight(tp::autograd::backward_input({out}, {gy}, {xc}));
  CHECK(ckpt.calls == 2);  // no recomputation
  check_same_grads({xc}, {xp});
  check_same_grads(ckpt.params(), plain.params());
  // The guard ends with its scope: the next checkpoint recomputes.
  ckpt.calls = 0;
  tp::Tensor again = ckpt.forward(xc.detach().requires_grad_(), true);
  CHECK(tp::autograd::recompute_ahead({again}));
}

TEST_CASE("recompute_ahead rebuilds what the backward meets first, once, with the same gradients",
          "[checkpoint]") {
  for (bool split : {false, true}) {
    DYNAMIC_SECTION((split ? "split backward" : "full backward")) {
      Net plain, ckpt;
      tp::Tensor x = tp::randn({5, kWidth});
      tp::Tensor gy = tp::randn({5, kWidth});
      tp::Tensor xp = x.detach().requires_grad_(), xc = x.detach().requires_grad_();
      tp::autograd::backward({plain.forward(xp, false)}, {gy});

      tp::Tensor out = ckpt.forward(xc, true);
      REQUIRE(ckpt.calls == 2);
      CHECK(tp::autograd::recompute_ahead({out}));  // the second block: the backward's first
      CHECK(ckpt.calls == 3);
      CHECK(tp::autograd::recompute_ahead({out}));  // then the first block
      CHECK(ckpt.calls == 4);
      CHECK_FALSE(tp::autograd::recompute_ahead({out}));              // nothing left to rebuild
      CHECK_FALSE(tp::autograd::recompute_ahead({tp::Tensor(), x}));  // no history at all
      if (split) {
        auto stash = tp::autograd::backward_input({out}, {gy}, {xc});
        tp::autograd::backward_weight(std::move(stash));
      } else {
        tp::autograd::backward({out}, {gy});
      }
      CHECK(ckpt.calls == 4);  // the backward recomputed nothing again
      check_same_grads({xc}, {xp});
      check_same_grads(ckpt.params(), plain.params());
      CHECK(ckpt.generator.uniform() == plain.generator.uniform());
    }
  }
}

TEST_CASE("recompute_ahead of an inner checkpoint recomputes the enclosing one first",
          "[checkpoint]") {
  Net plain, ckpt;
  tp::Tensor x = tp::randn({4, kWidth});
  tp::Tensor xp = x.detach().requires_grad_(), xc = x.detach().requires_grad_();
  tp::sum(plain.forward(xp, false)).backward();
  // An outer checkpoint around both blocks, each block checkpointed inside it.
  tp::Tensor out = tp::checkpoint([&](const tp::Tensor& in) { return ckpt.forward(in, true); }, xc);
  REQUIRE(ckpt.calls == 2);
  CHECK(tp::autograd::recompute_ahead({out}));
  tp::sum(out).backward();
  check_same_grads({xc}, {xp});
  check_same_grads(ckpt.params(), plain.params());
}

TEST_CASE("checkpoints nest", "[checkpoint]") {
  Block a(1), b(2), c(3);
  Block a2(1), b2(2), c2(3);
  tp::Generator g_plain(5), g_ckpt(5);
  tp::Tensor x = tp::randn({4, kWidth});
  tp::Tensor gy = tp::randn({4, kWidth});

  auto plain = [&](const tp::Tensor& in) { return c(b(a(in, &g_plain), &g_plain), &g_plain); };
  int outer_calls = 0, inner_calls = 0;
  auto nested = [&](const tp::Tensor& in) {
    ++outer_calls;
    tp::Tensor h = a2(in, &g_ckpt);
    h = tp::checkpoint(
        [&](const tp::Tensor& y) {
          ++inner_calls;
          return b2(y, &g_ckpt);
        },
        h);
    return c2(h, &g_ckpt);
  };
  SECTION("full backward") {
    tp::Tensor xp = x.detach().requires_grad_(), xc = x.detach().requires_grad_();
    tp::autograd::backward({plain(xp)}, {gy});
    tp::Tensor out = tp::checkpoint(nested, xc);
    tp::autograd::backward({out}, {gy});
    // The outer forward, its recomputation (which runs the inner forward again), then the inner
    // recomputation.
    CHECK(outer_calls == 2);
    CHECK(inner_calls == 3);
    check_same_grads({xc}, {xp});
    for (auto [got, want] : {std::pair{&a2, &a}, {&b2, &b}, {&c2, &c}})
      check_same_grads(got->params(), want->params());
  }
  SECTION("split backward") {
    tp::Tensor xp = x.detach().requires_grad_(), xc = x.detach().requires_grad_();
    tp::autograd::backward({plain(xp)}, {gy});
    tp::Tensor out = tp::checkpoint(nested, xc);
    auto stash = tp::autograd::backward_input({out}, {gy}, {xc});
    tp::autograd::backward_weight(std::move(stash));
    CHECK(outer_calls == 2);
    CHECK(inner_calls == 3);
    check_same_grads({xc}, {xp});
    for (auto [got, want] : {std::pair{&a2, &a}, {&b2, &b}, {&c2, &c}})
      check_same_grads(got->params(), want->params());
  }
}

TEST_CASE("a checkpoint inside a checkpoint that only calls it", "[checkpoint]") {
  Block a(4), a2(4);
  tp::Tensor x = tp::randn({3, kWidth});
  tp::Tensor xp = x.detach().requires_grad_(), xc = x.detach().requires_grad_();
  tp::manual_seed(3);  // the blocks' dropout draws from the default generator
  tp::sum(a(xp, nullptr)).backward();
  tp::manual_seed(3);
  tp::Tensor out = tp::checkpoint(
      [&](const tp::Tensor& in) {
        return tp::checkpoint([&](const tp::Tensor& y) { return a2(y, nullptr); }, in);
      },
      xc);
  tp::sum(out).backward();
  check_same_grads({xc}, {xp});
  check_same_grads(a2.params(), a.params());
}

TEST_CASE("dropout on the default generator repeats its mask", "[checkpoint]") {
  Block a(6), a2(6);
  tp::Tensor x = tp::randn({4, kWidth});
  tp::Tensor xp = x.detach().requires_grad_(), xc = x.detach().requires_grad_();
  tp::manual_seed(11);
  tp::sum(a(xp, nullptr)).backward();
  const double next_plain = tp::default_generator().uniform();
  tp::manual_seed(11);
  tp::Tensor out = tp::checkpoint([&](const tp::Tensor& y) { return a2(y, nullptr); }, xc);
  tp::sum(out).backward();
  CHECK(tp::default_generator().uniform() == next_plain);
  check_same_grads({xc}, {xp});
  check_same_grads(a2.params(), a.params());
}

TEST_CASE("checkpoint takes several inputs and returns several outputs", "[checkpoint]") {
  tp::Tensor a = tp::randn({3, 4}).requires_grad_(), b = tp::randn({3, 4}).requires_grad_();
  tp::Tensor a2 = a.detach().requires_grad_(), b2 = b.detach().requires_grad_();
  auto fn = [](const tp::Tensor& p, const tp::Tensor& q) {
    return std::vector<tp::Tensor>{tp::relu(p * q), tp::tanh(p - q)};
  };
  std::vector<tp::Tensor> plain = fn(a, b);
  std::vector<tp::Tensor> ckpt = tp::checkpoint(fn, a2, b2);
  REQUIRE(ckpt.size() == 2);
  tp::sum(plain[0] * plain[1] + plain[1]).backward();
  tp::sum(ckpt[0] * ckpt[1] + ckpt[1]).backward();
  check_same_grads({a2, b2}, {a, b});

  // The vector form, with an input that needs no gradient and an undefined one.
  tp::Tensor c = tp::randn({3, 4});
  tp::Tensor w = tp::randn({3, 4}).requires_grad_();
  std::vector<tp::Tensor> out = tp::checkpoint(
      [](const std::vector<tp::Tensor>& in) {
        return std::vector<tp::Tensor>{in[0] * in[1] + (in[2].defined() ? in[2] : in[0])};
      },
      {c, w, tp::Tensor()});
  tp::sum(out[0]).backward();
  CHECK(w.grad().to_vector() == c.to_vector());
}

TEST_CASE("checkpoint under no-grad just runs the function", "[checkpoint]") {
  Block a(7);
  tp::Tensor x = tp::randn({2, kWidth});
  int calls = 0;
  tp::NoGradGuard no_grad;
  tp::Tensor out = tp::checkpoint(
      [&](const tp::Tensor& y) {
        ++calls;
        return a(y, nullptr);
      },
      x);
  CHECK(calls == 1);
  CHECK_FALSE(out.requires_grad());
}

TEST_CASE("a checkpointed forward keeps fewer bytes than the plain one", "[checkpoint]") {
  // Four blocks on a batch large enough that the activations dominate.
  std::vector<Block> blocks;
  for (int i = 0; i < 4; ++i) blocks.emplace_back(10 + i);
  tp::Tensor x = tp::randn({512, kWidth}).requires_grad_();
  auto held_after_forward = [&](bool checkpointed) {
    const size_t before = tp::host_memory_stats().allocated_bytes;
    tp::Tensor h = x;
    for (const Block& b : blocks) {
      auto fn = [&b](const tp::Tensor& in) { return b(in, nullptr); };
      h = checkpointed ? tp::checkpoint(fn, h) : fn(h);
    }
    const size_t after = tp::host_memory_stats().allocated_bytes;
    tp::sum(h).backward();
    return after - before;
  };
  const size_t plain = held_after_forward(false);
  const size_t ckpt = held_after_forward(true);
  INFO("plain " << plain << " bytes, checkpointed " << ckpt << " bytes");
  // Each block keeps its output (the next block's input); the plain one also its hidden
  // activations (about 4 of [512, 16] per block, against one [512, 8]).
  CHECK(ckpt * 4 < plain);
}

TEST_CASE("between I and W a recomputed block holds its weight gradients, not its activations",
          "[checkpoint]") {
  // A batch of 512 rows: a block's activations (about four [512, 16] tensors and the output
  // gradients its linears need) far outweigh its parameters' gradients (16 * 8 * 2 + 2 * 16).
  tp::Tensor gy = tp::randn({512, kWidth});
  auto held_between_i_and_w = [&](bool checkpointed) {
    Block block(20);
    tp::Tensor x = tp::randn({512, kWidth}).requires_grad_();
    auto fn = [&block](const tp::Tensor& in) { return block(in, nullptr); };
    tp::Tensor out = checkpointed ? tp::checkpoint(fn, x) : fn(x);
    auto stash = tp::autograd::backward_input({out}, {gy}, {x});
    out = tp::Tensor();
    x = tp::Tensor();
    const size_t held = tp::host_memory_stats().allocated_bytes;
    tp::autograd::backward_weight(std::move(stash));
    const size_t grads = [&] {
      size_t bytes = 0;
      for (const auto& p : block.params()) bytes += p.grad().nbytes();
      return bytes;
    }();
    return std::pair<size_t, size_t>{held - tp::host_memory_stats().allocated_bytes + grads, grads};
  };
  const auto [plain, grad_bytes] = held_between_i_and_w(false);
  const auto [ckpt, same_grad_bytes] = held_between_i_and_w(true);
  INFO("W freed " << plain << " bytes plain, " << ckpt << " checkpointed; weight gradients "
                  << grad_bytes << " bytes");
  // Plain: W needs the linears' inputs and output gradients ([512, 8] and [512, 16] each).
  CHECK(plain > 8 * grad_bytes);
  // Recomputed: I computed the weight gradients and let the recomputed activations go.
  CHECK(ckpt <= grad_bytes);
}

TEST_CASE("draws of other threads from a shared generator do not disturb the replay",
          "[checkpoint]") {
  // Between the function's two dropouts another thread draws from the same generator, as stages
  // on other threads draw from the default one. The recomputation replays this thread's draws
  // from the states they started from, whatever the other thread did in the meantime.
  tp::Tensor w = tp::randn({6, 6}).requires_grad_();
  tp::Tensor w2 = w.detach().requires_grad_();
  tp::Tensor x = tp::randn({4, 6});
  auto fn = [](const tp::Tensor& in, const tp::Tensor& weight, tp::Generator& g) {
    tp::Tensor h = tp::dropout(tp::linear(in, weight), 0.5f, true, &g);
    std::thread([&g] { tp::randn({16}, {}, &g); }).join();
    return tp::dropout(tp::linear(h, weight), 0.5f, true, &g);
  };
  tp::Generator g_plain(3), g_ckpt(3);
  tp::sum(fn(x, w, g_plain)).backward();
  tp::Tensor y = tp::checkpoint(
      [&](const tp::Tensor& in, const tp::Tensor& weight) { return fn(in, weight, g_ckpt); }, x,
      w2);
  tp::sum(y).backward();
  check_same_grads({w2}, {w});
}
