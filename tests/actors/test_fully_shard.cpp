// Tests for fsdp/fully_shard.h: sharded training on ranks of one job joined in this process
// (dp 4 and dp 2, threads) against the unsharded single-rank run of the same global batch, with
// dims 0 not divisible by dp, reshard_after_forward both ways, bfloat16 mixed precision, gradient
// accumulation without sync, prefetch, and the clear errors for bad input.
#include <atomic>
#include <catch2/catch.hpp>
#include <cmath>
#include <stdexcept>

#include "in_process_job.h"
#include "tensorplay/distributed/fsdp/fully_shard.h"
#include "tensorplay/nn.h"
#include "tensorplay/optim.h"
#include "tensorplay/tensor.h"

namespace tp = tensorplay;
namespace dist = tensorplay::distributed;
namespace fsdp = tensorplay::distributed::fsdp;

namespace {

// Two blocks and a head; dims 0 are 7, 5 and 3: not divisible by 2 or 4.
struct BlockImpl : tp::nn::Module {
  BlockImpl() {
    up = register_module("up", tp::nn::Linear(5, 7));
    down = register_module("down", tp::nn::Linear(7, 5));
  }
  tp::Tensor forward(const tp::Tensor& x) override { return down(tp::relu(up(x))); }
  tp::nn::Linear up{nullptr}, down{nullptr};
};
TENSORPLAY_MODULE(Block);

struct NetImpl : tp::nn::Module {
  NetImpl() {
    b0 = register_module("b0", Block());
    b1 = register_module("b1", Block());
    head = register_module("head", tp::nn::Linear(5, 3));
  }
  tp::Tensor forward(const tp::Tensor& x) override { return head(b1(b0(x))); }
  Block b0{nullptr}, b1{nullptr};
  tp::nn::Linear head{nullptr};
};
TENSORPLAY_MODULE(Net);

constexpr int kBatch = 8;

tp::Tensor ramp(const tp::Shape& shape, float scale, float shift) {
  std::vector<float> v(static_cast<size_t>(tp::numel(shape)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = std::sin(scale * static_cast<float>(i) + shift);
  return tp::from_vector(v, shape);
}

/// What a run saw: losses of 3 AdamW steps, the last step's gradients (gathered) and the
/// parameters after the steps, by name.
struct Run {
  std::vector<float> losses;
  std::map<std::string, std::vector<float>> grads, params;
};

struct Setup {
  bool reshard_after_forward = true;
  fsdp::MixedPrecisionPolicy mp;
  bool prefetch = false;
  bool accumulate = false;  // two half batches, the first without gradient sync
  bool recompute = false;   // each block checkpointed (its forward recomputed in the backward)
  bool keep_after_backward = false;  // set_reshard_after_backward(false), reshard() before step
};

/// 3 AdamW steps on this member's rows of the global batch, the model sharded over `group`.
Run train(const tp::StateDict& init, dist::ProcessGroup group, const Setup& setup) {
  Net net;
  net->load_state_dict(init);
  net->b0->set_checkpointed(setup.recompute);
  net->b1->set_checkpointed(setup.recompute);
  fsdp::FullyShardOptions o{
      .mesh = group, .reshard_after_forward = setup.reshard_after_forward, .mp_policy = setup.mp};
  auto f0 = fsdp::fully_shard(net->b0, o);
  auto f1 = fsdp::fully_shard(net->b1, o);
  auto root = fsdp::fully_shard(net, o);
  if (setup.prefetch) {
    f0.set_modules_to_forward_prefetch({f1});
    f1.set_modules_to_backward_prefetch({f0});
  }
  if (setup.keep_after_backward)
    for (auto* m : {&f0, &f1, &root}) m->set_reshard_after_backward(false);
  tp::optim::AdamW opt(net->parameters(), {.lr = 1e-2f});
  const int n = group.size(), me = group.rank();
  const int64_t rows = kBatch / n;
  Run run;
  for (int step = 0; step < 3; ++step) {  // one global batch, stepped on 3 times
    tp::Tensor x = ramp({kBatch, 5}, 0.37f, 0.0f);
    tp::Tensor y = ramp({kBatch, 3}, 0.11f, 1.0f);
    opt.zero_grad();
    tp::Tensor local_loss;
    if (setup.accumulate) {
      const int64_t half = rows / 2;
      float total = 0;
      for (int part = 0; part < 2; ++part) {
        for (auto* m : {&f0, &f1, &root}) m->set_requires_gradient_sync(part == 1);
        const int64_t lo = me * rows + part * half;
        tp::Tensor loss = tp::mul(tp::mse_loss(net(x.slice0(lo, lo + half)).to(tp::DType::Float32),
                                               y.slice0(lo, lo + half)),
                                  tp::scalar_tensor(0.5f));
        loss.backward();
        total += loss.item();
      }
      local_loss = tp::scalar_tensor(total);
    } else {
      tp::Tensor out = net(x.slice0(me * rows, (me + 1) * rows)).to(tp::DType::Float32);
      local_loss = tp::mse_loss(out, y.slice0(me * rows, (me + 1) * rows));
      local_loss.backward();
    }
    tp::Tensor l = local_loss.detach().to(tp::DType::Float32).reshape({1});
    l = tp::from_vector(l.to_vector(), {1});
    group.all_reduce(l);
    run.losses.push_back(l.item() / static_cast<float>(n));
    if (setup.keep_after_backward) {
      // Still gathered after the backward (7 rows, not this rank's 4 or 2): reshard to step.
      if (net->b0->up->weight.size(0) != 7) throw std::runtime_error("resharded after backward");
      for (auto* m : {&f0, &f1, &root}) m->reshard();
    }
    if (step == 2) {
      // Gradients gathered from the shards (each [rows, ...], padded): the first dim-0 rows.
      for (auto& [name, p] : net->named_parameters()) {
        tp::Tensor g = p.grad();
        tp::Tensor all = tp::zeros({g.size(0) * n, g.numel() / g.size(0)});
        group.all_gather_into_tensor(all, g.reshape({g.size(0), -1}));
        run.grads[name] = all.to_vector();
      }
    }
    opt.step();
  }
  for (auto* m : {&f0, &f1, &root}) m->unshard();
  for (auto& [name, p] : net->named_parameters())
    run.params[name] = p.to(tp::DType::Float32).to_vector();
  for (auto* m : {&f0, &f1, &root}) m->reshard();
  return run;
}

/// The largest |a - b| over the first b.size() values of a (a may hold padding after them).
float max_diff(const std::vector<float>& a, const std::vector<float>& b) {
  float d = 0;
  for (size_t i = 0; i < b.size() && i < a.size(); ++i) d = std::max(d, std::abs(a[i] - b[i]));
  return a.size() < b.size() ? INFINITY : d;
}

tp::StateDict initial_state() {
  Net net;
  tp::StateDict out;
  for (auto& [name, t] : net->state_dict()) out.insert(name, t.clone().detach());
  return out;
}

/// `runs` (one per member) against `ref`, within `tol` (losses, gradients, parameters).
void check_against(const std::vector<Run>& runs, const Run& ref, float tol) {
  for (size_t r = 0; r < runs.size(); ++r) {
    INFO("member " << r);
    REQUIRE(runs[r].losses.size() == 3);
    for (int s = 0; s < 3; ++s) CHECK(std::abs(runs[r].losses[s] - ref.losses[s]) <= tol);
    for (auto& [name, g] : ref.grads) {
      INFO("gradient " << name);
      CHECK(max_diff(runs[r].grads.at(name), g) <= tol);
    }
    for (auto& [name, p] : ref.params) {
      INFO("parameter " << name);
      CHECK(max_diff(runs[r].params.at(name), p) <= tol);
    }
  }
}

std::vector<Run> train_on_threads(int n, const tp::StateDict& init, const Setup& setup) {
  std::vector<Run> runs(n);
  std::vector<int> ranks(n);
  for (int i = 0; i < n; ++i) ranks[i] = i;
  auto outcomes = tp::testing::run_ranks(n, ranks, std::chrono::seconds(30),
                                         [&](auto& g) { runs[g.rank()] = train(init, g, setup); });
  for (int i = 0; i < n; ++i) {
    INFO("rank " << i);
    CHECK(outcomes[i].error == "");
  }
  return runs;
}

}  // namespace

TEST_CASE("fully_shard on dp 4 and dp 2 trains as the unsharded run of the same global batch",
          "[fsdp][fully_shard]") {
  dist::destroy_process_group();
  const tp::StateDict init = initial_state();
  const Run ref = train(init, dist::ProcessGroup(), {});  // a group of one: nothing sharded
  REQUIRE(ref.losses.size() == 3);
  CHECK(ref.losses[2] < ref.losses[0]);
  // float32 rounding: the averaged gradients are summed in another order than the full batch's.
  const float tol = 1e-6f;  // measured: at most 6e-8
  SECTION("dp 4, reshard after forward") { check_against(train_on_threads(4, init, {}), ref, tol); }
  SECTION("dp 2, gathered until backward ends, with prefetch") {
    check_against(train_on_threads(2, init, {.reshard_after_forward = false, .prefetch = true}),
                  ref, tol);
  }
  SECTION("dp 4, gathered after the backward until reshard()") {
    check_against(train_on_threads(4, init, {.keep_after_backward = true}), ref, tol);
  }
  SECTION("dp 2, each block recomputed in the backward") {
    check_against(train_on_threads(2, init, {.recompute = true}), ref, tol);
  }
  SECTION("dp 2, two half batches, the first without gradient sync") {
    check_against(train_on_threads(2, init, {.accumulate = true}), ref, tol);
  }
}

TEST_CASE(
    "fully_shard with bfloat16 compute keeps float32 master shards and matches the "
    "unsharded mixed-precision run",
    "[fsdp][fully_shard]") {
  dist::destroy_process_group();
  const tp::StateDict init = initial_state();
  const Setup bf16{.mp = {.param_dtype = tp::DType::BFloat16}};
  const Run ref = train(init, dist::ProcessGroup(), bf16);
  // Within bfloat16 rounding: each member's gradient is rounded to bfloat16 before the float32
  // average, the unsharded run's once over the whole batch.
  check_against(train_on_threads(2, init, bf16), ref, 4e-3f);  // measured: at most 1e-3
}

namespace {

/// A GPT whose embedding is tied to its head (one parameter, in the root's shards) and whose
/// vocabulary (33) and context (9) divide by no dp: 3 AdamW steps with the gradients clipped to
/// a global norm of 0.5 (sharded: fsdp::clip_grad_norm over the group), the norms kept.
Run train_gpt(const tp::StateDict& init, dist::ProcessGroup group, bool sharded) {
  tp::nn::GPT gpt(tp::nn::GPTConfig{
      .vocab_size = 33, .context_length = 9, .n_layer = 2, .n_head = 2, .width = 16});
  gpt->load_state_dict(init);
  if (sharded) {
    for (const auto& block : *gpt->blocks) fsdp::fully_shard(block, {.mesh = group});
    fsdp::fully_shard(gpt, {.mesh = group});
  }
  tp::optim::AdamW opt(gpt->parameters(), {.lr = 1e-2f});
  const int n = group.size(), me = group.rank();
  const int64_t rows = 4 / n;
  std::vector<float> ids(4 * 9);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<float>((i * 5 + 3) % 33);
  const tp::Tensor x = tp::from_vector(ids, {4, 9}).slice0(me * rows, (me + 1) * rows);
  const tp::Tensor y = x.reshape({rows * 9});
  Run run;
  for (int step = 0; step < 3; ++step) {
    opt.zero_grad();
    tp::Tensor loss = tp::cross_entropy(gpt(x).reshape({rows * 9, 33}), y);
    loss.backward();
    tp::Tensor l = tp::from_vector({loss.item()}, {1});
    group.all_reduce(l);
    run.losses.push_back(l.item() / static_cast<float>(n));
    run.losses.push_back(sharded ? fsdp::clip_grad_norm(gpt->parameters(), 0.5f, group)
                                 : tp::optim::clip_grad_norm(gpt->parameters(), 0.5f));
    opt.step();
  }
  if (sharded) {
    for (auto& [name, p] : gpt->named_parameters()) {
      tp::Tensor all = tp::zeros({p.size(0) * n, p.numel() / p.size(0)});
      group.all_gather_into_tensor(all, p.reshape({p.size(0), -1}));
      run.params[name] = all.to_vector();
    }
  } else {
    for (auto& [name, p] : gpt->named_parameters()) run.params[name] = p.to_vector();
  }
  return run;
}

}  // namespace

TEST_CASE("a GPT with tied weights and uneven dims trains sharded as unsharded, clipped globally",
          "[fsdp][fully_shard]") {
  dist::destroy_process_group();
  tp::StateDict init;
  {
    tp::nn::GPT gpt(tp::nn::GPTConfig{
        .vocab_size = 33, .context_length = 9, .n_layer = 2, .n_head = 2, .width = 16});
    for (auto& [name, t] : gpt->state_dict()) init.insert(name, t.clone().detach());
  }
  const Run ref = train_gpt(init, dist::ProcessGroup(), false);
  std::vector<Run> runs(2);
  auto outcomes = tp::testing::run_ranks(2, {0, 1}, std::chrono::seconds(30), [&](auto& g) {
    runs[g.rank()] = train_gpt(init, g, true);
  });
  for (int r = 0; r < 2; ++r) {
    INFO("rank " << r);
    CHECK(outcomes[r].error == "");
    REQUIRE(runs[r].losses.size() == ref.losses.size());
    // Losses and the norms before clipping, alternately; the norms exceed 0.5, so clipping acted.
    for (size_t i = 0; i < ref.losses.size(); ++i)
      CHECK(runs[r].losses[i] == Approx(ref.losses[i]).epsilon(1e-5));
    CHECK(ref.losses[1] > 0.5f);
    for (auto& [name, p] : ref.params) {
      INFO("parameter " << name);
      CHECK(max_diff(runs[r].params.at(name), p) <= 1e-5f);
    }
  }
}

TEST_CASE("fully_shard stores shards and refuses bad input clearly", "[fsdp][fully_shard]") {
  dist::destroy_process_group();
  std::vector<std::string> twice(2), differ(2), outside(2);
  std::vector<std::vector<int64_t>> shard_rows(2);
  std::vector<size_t> bytes(2);
  auto outcomes = tp::testing::run_ranks(2, {0, 1}, std::chrono::seconds(10), [&](auto& g) {
    const int me = g.rank();
    Net net;
    auto f = fsdp::fully_shard(net->b0, {.mesh = g});
    shard_rows[me] = {net->b0->up->weight.size(0), net->b0->down->weight.size(0)};
    bytes[me] = f.shard_bytes();
    twice[me] = tp::testing::error_of([&] { fsdp::fully_shard(net->b0, {.mesh = g}); });
    // Member 1 shards another module than member 0.
    differ[me] = tp::testing::error_of([&] {
      fsdp::fully_shard(me == 0 ? std::shared_ptr<tp::nn::Module>(net->head.ptr())
                                : std::shared_ptr<tp::nn::Module>(net->b1.ptr()),
                        {.mesh = g});
    });
    // Rank 1 passes a group it is not a member of.
    if (me == 1)
      outside[me] =
          tp::testing::error_of([&] { fsdp::fully_shard(net->head, {.mesh = g.new_group({0})}); });
  });
  for (int me = 0; me < 2; ++me) {
    INFO("rank " << me);
    CHECK(outcomes[me].error == "");
    CHECK(shard_rows[me] == std::vector<int64_t>{4, 3});  // 7 rows -> 4 + 4 (padded), 5 -> 3 + 3
    // up: 4x5 + 4, down: 3x7 + 3, float32.
    CHECK(bytes[me] == (4 * 5 + 4 + 3 * 7 + 3) * 4);
    CHECK_THAT(twice[me], Catch::Contains("already sharded"));
    CHECK_THAT(differ[me], Catch::Contains("member 1 (rank 1) shards another group or other "
                                           "parameters than member 0 (rank 0)"));
  }
  CHECK_THAT(outside[1], Catch::Contains("rank 1 is not a member of the group given as mesh"));
}

TEST_CASE("a member that shards over another group than the others is named when the wait runs out",
          "[fsdp][fully_shard]") {
  std::string error;
  auto outcomes = tp::testing::run_ranks(2, {0, 1}, std::chrono::seconds(3), [&](auto& g) {
    Net net;
    if (g.rank() == 0) {
      error = tp::testing::error_of([&] { fsdp::fully_shard(net, {.mesh = g}); });
    } else {
      fsdp::fully_shard(net, {.mesh = g.new_group({1})});  // alone: nothing to agree on
    }
  });
  CHECK(outcomes[0].error == "");
  CHECK(outcomes[1].error == "");
  CHECK_THAT(error, Catch::StartsWith("fully_shard: ") &&
                        Catch::Contains("[1] did not take part") &&
                        Catch::Contains("with the same group?"));
}
