// One rank of a multi-process pipeline check, started by tp-launch: trains a model with a tied
// weight on the first and last stage and a skip connection across stages under a schedule, and
// compares losses and every gradient with the embedded single-process run of the same model.
// Also runs misuse cases: each must fail on every rank with a clear error, without hanging.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <map>
#include <string>
#include <thread>

#include "actors/process_group.h"
#include "actors/schedule.h"
#include "stages/pipe_split.h"
#include "stages/pipeline.h"
#include "tensors/tensors.h"

namespace tp = tensorplay;
namespace pp = tensorplay::pipelining;
namespace sc = tensorplay::schedules;
namespace dist = tensorplay::distributed;

namespace {

constexpr int64_t kWidth = 16;

// layers.0 runs in stage 0, layers.i in stage i; the last stage reads layers.0's weight again
// (a tie across the first and last rank) and stage 0's output (a skip across every stage).
struct TieSkipNetImpl : tp::nn::Module {
  explicit TieSkipNetImpl(int num_stages) {
    layers = register_module("layers", tp::nn::ModuleList());
    for (int i = 0; i < num_stages - 1; ++i) layers->push_back(tp::nn::Linear(kWidth, kWidth));
  }
  tp::Tensor forward(const tp::Tensor& x) override {
    tp::Tensor h0 = tp::relu((*(*layers)[0])(x));
    tp::Tensor h = h0;
    for (size_t i = 1; i < layers->size(); ++i) {
      pp::pipe_split();
      h = tp::tanh((*(*layers)[i])(h));
    }
    pp::pipe_split();
    return tp::linear(h + h0, layers->at<tp::nn::LinearImpl>(0)->weight);
  }
  tp::nn::ModuleList layers{nullptr};
};
TENSORPLAY_MODULE(TieSkipNet);

double rel_diff(const tp::Tensor& a, const tp::Tensor& b) {
  std::vector<float> x = a.to_vector(), y = b.to_vector();
  if (x.size() != y.size()) return INFINITY;
  double worst = 0;
  for (size_t i = 0; i < x.size(); ++i)
    worst = std::max(worst, std::fabs(static_cast<double>(x[i]) - y[i]) /
                                std::max(1.0, std::fabs(static_cast<double>(y[i]))));
  return worst;
}

struct Args {
  std::string schedule = "1F1B";
  int microbatches = 8;
  int steps = 3;
  std::string misuse;          // empty: the equivalence run
  std::string device = "cpu";  // "cuda": each rank's stages on its local GPU (NCCL or staged UCX)
  double tolerance = 1e-5;     // relative, of each value's size (at least 1)
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--schedule")
      a.schedule = value;
    else if (flag == "--microbatches")
      a.microbatches = std::atoi(value.c_str());
    else if (flag == "--steps")
      a.steps = std::atoi(value.c_str());
    else if (flag == "--misuse")
      a.misuse = value;
    else if (flag == "--device")
      a.device = value;
    else if (flag == "--tolerance")
      a.tolerance = std::atof(value.c_str());
    else
      throw std::invalid_argument("unknown flag " + flag);
  }
  return a;
}

int equivalence(const Args& args) {
  const int rank = dist::get_rank(), world = dist::get_world_size();
  sc::ScheduleKind kind = sc::parse_schedule_kind(args.schedule);
  int spr = sc::is_single_stage_per_rank(kind) ? 1 : sc::default_stages_per_rank(kind);
  int num_stages = world * spr;
  const int64_t batch = 2 * args.microbatches;

  tp::manual_seed(11);
  TieSkipNet model(num_stages), twin(num_stages);
  twin->load_state_dict(model->state_dict());
  auto pipe = pp::pipeline(model, {tp::zeros({batch / args.microbatches, kWidth})});
  tp::Device device = args.device == "cpu" ? tp::cpu() : dist::local_devices().at(0);
  if (args.device != "cpu" && !device.is_cuda()) {
    std::printf("rank %d: no CUDA device: skipped\n", rank);
    return 77;
  }
  auto local = pp::build_stages(pipe, pp::stages_of_rank(kind, rank, num_stages), device,
                                dist::world_group());
  pp::PipelineSchedule schedule(local, args.microbatches, tp::nn::mse_loss, kind);
  if (!schedule.is_distributed()) throw std::logic_error("the schedule did not go distributed");

  auto ref_pipe = pp::pipeline(twin, {tp::zeros({batch / args.microbatches, kWidth})});
  auto ref_stages = pp::build_stages(ref_pipe, {tp::cpu()});
  pp::PipelineSchedule reference(ref_stages, args.microbatches, tp::nn::mse_loss, kind);

  tp::optim::SGD opt(pp::parameters(local), {.lr = 0.05f, .momentum = 0.9f});
  tp::optim::SGD ref_opt(pp::parameters(ref_stages), {.lr = 0.05f, .momentum = 0.9f});
  bool hosts_first = local.front()->is_first(), hosts_last = local.back()->is_last();
  tp::Generator data(23);
  int compared = 0, bad = 0;
  double worst = 0;
  for (int step = 0; step < args.steps; ++step) {
    tp::Tensor x = tp::randn({batch, kWidth}, {}, &data), y = tp::randn({batch, kWidth}, {}, &data);
    std::vector<tp::Tensor> losses, ref_losses;
    tp::Tensor out =
        schedule.step(hosts_first ? std::vector<tp::Tensor>{x} : std::vector<tp::Tensor>{},
                      {.target = y, .losses = &losses});
    tp::Tensor ref_out = reference.step({x}, {.target = y, .losses = &ref_losses});
    if (hosts_last) {
      if (losses.size() != ref_losses.size()) {
        std::printf("rank %d step %d: %zu losses, expected %zu\n", rank, step, losses.size(),
                    ref_losses.size());
        ++bad;
      }
      for (size_t mb = 0; mb < std::min(losses.size(), ref_losses.size()); ++mb) {
        double d = rel_diff(losses[mb], ref_losses[mb]);
        worst = std::max(worst, d);
        ++compared;
        if (d > args.tolerance) {
          std::printf("rank %d step %d: loss of microbatch %zu differs by %g\n", rank, step, mb, d);
          ++bad;
        }
      }
      double d = rel_diff(out, ref_out);
      if (d > args.tolerance) {
        std::printf("rank %d step %d: output differs by %g\n", rank, step, d);
        ++bad;
      }
    } else if (out.defined()) {
      std::printf("rank %d step %d: a rank without the last stage got an output\n", rank, step);
      ++bad;
    }
    for (const auto& s : local) {
      for (const auto& [name, p] : s->module().named_parameters()) {
        tp::Tensor want = ref_stages[s->stage_index()]->module().find_tensor(name).grad();
        if (!p.grad().defined() || !want.defined()) {
          std::printf("rank %d step %d: stage %d %s has no gradient\n", rank, step,
                      s->stage_index(), name.c_str());
          ++bad;
          continue;
        }
        double d = rel_diff(p.grad(), want);
        worst = std::max(worst, d);
        ++compared;
        if (d > args.tolerance) {
          std::printf("rank %d step %d: stage %d %s gradient differs by %g\n", rank, step,
                      s->stage_index(), name.c_str(), d);
          ++bad;
        }
      }
    }
    opt.step();
    opt.zero_grad();
    ref_opt.step();
    ref_opt.zero_grad();
  }
  // Forward only (eval) after the training steps: the same outputs and losses.
  tp::Tensor x = tp::randn({batch, kWidth}, {}, &data), y = tp::randn({batch, kWidth}, {}, &data);
  std::vector<tp::Tensor> losses, ref_losses;
  tp::Tensor out =
      schedule.eval(hosts_first ? std::vector<tp::Tensor>{x.to(device)} : std::vector<tp::Tensor>{},
                    {.target = y.to(device), .losses = &losses});
  tp::Tensor ref_out = reference.eval({x}, {.target = y, .losses = &ref_losses});
  if (hosts_last) {
    double d = rel_diff(out, ref_out);
    for (size_t mb = 0; mb < losses.size() && mb < ref_losses.size(); ++mb)
      d = std::max(d, rel_diff(losses[mb], ref_losses[mb]));
    ++compared;
    worst = std::max(worst, d);
    if (d > args.tolerance || losses.size() != ref_losses.size()) {
      std::printf("rank %d eval: outputs or losses differ by %g (%zu losses, expected %zu)\n", rank,
                  d, losses.size(), ref_losses.size());
      ++bad;
    }
  }
  std::printf(
      "rank %d: %s over %d processes, %d stages, %d steps: %d values compared, largest "
      "relative difference %.3g, %d mismatches\n",
      rank, args.schedule.c_str(), world, num_stages, args.steps, compared, worst, bad);
  return bad == 0 && compared > 0 ? 0 : 1;
}

// The stage `index` of a TieSkipNet of `num_stages` stages, built for the world group, with the
// model and pipe it comes from (the misuse cases' setup).
struct RankStage {
  RankStage(int num_stages, int index)
      : model(num_stages),
        pipe(pp::pipeline(model, {tp::zeros({2, kWidth})})),
        stage(pp::build_stage(pipe, index, tp::cpu(), dist::world_group())) {}
  TieSkipNet model;
  pp::Pipe pipe;
  pp::PipelineStage stage;
};

// Steps `schedule` on a rank of a job whose last rank misbehaves; returns 0 when the step failed
// within `limit_s` seconds with an error holding every one of `expect`.
int expect_step_failure(pp::PipelineSchedule& schedule, int rank,
                        const std::vector<std::string>& expect, double limit_s) {
  auto t0 = std::chrono::steady_clock::now();
  try {
    schedule.step(rank == 0 ? std::vector<tp::Tensor>{tp::randn({8, kWidth})}
                            : std::vector<tp::Tensor>{});
  } catch (const std::exception& e) {
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::string what = e.what();
    bool ok = s < limit_s;
    for (const std::string& part : expect) ok = ok && what.find(part) != std::string::npos;
    std::printf("rank %d: %s error after %.2f s: %s\n", rank, ok ? "the expected" : "an UNEXPECTED",
                s, e.what());
    return ok ? 0 : 1;
  }
  std::printf("rank %d: the step finished without the last rank\n", rank);
  return 1;
}

// Runs a misuse case; returns 0 when this rank got an error containing `expect`.
int misuse(const Args& args) {
  const int rank = dist::get_rank(), world = dist::get_world_size();
  std::string expect;
  try {
    tp::manual_seed(11);
    if (args.misuse == "duplicate-stage") {
      expect = "stage 0 is built on rank 0";
      RankStage own(world, 0);  // every rank builds stage 0
      pp::Schedule1F1B schedule(own.stage, 4, tp::nn::mse_loss);
    } else if (args.misuse == "world-size") {
      expect = "need " + std::to_string(2 * world) + " ranks, but the process group has " +
               std::to_string(world);
      RankStage own(2 * world, rank);
      pp::Schedule1F1B schedule(own.stage, 4, tp::nn::mse_loss);
    } else if (args.misuse == "microbatches") {
      expect = "ranks disagree on n_microbatches";
      RankStage own(world, rank);
      pp::Schedule1F1B schedule(own.stage, rank == 0 ? 8 : 4, tp::nn::mse_loss);
    } else if (args.misuse == "local-error") {
      // Rank 1 cannot build its share (too few microbatches for 1F1B); rank 0 could: both fail
      // at once with rank 1's reason.
      expect = "rank 1 (";
      RankStage own(world, rank);
      pp::Schedule1F1B schedule(own.stage, rank == 1 ? 1 : 8, tp::nn::mse_loss);
    } else if (args.misuse == "inputs-on-wrong-rank") {
      expect = "does not host stage 0";
      RankStage own(world, rank);
      pp::Schedule1F1B schedule(own.stage, 4, tp::nn::mse_loss);
      tp::Tensor x = tp::randn({8, kWidth}), y = tp::randn({8, kWidth});
      bool failed = false;
      try {
        schedule.step({x}, {.target = y});  // every rank feeds inputs: only rank 0 may
      } catch (const std::exception& e) {
        failed = std::string(e.what()).find(expect) != std::string::npos;
        std::printf("rank %d: got the expected error: %s\n", rank, e.what());
      }
      if (!failed) {
        std::printf("rank %d: no error naming the misuse\n", rank);
        return 1;
      }
      // The schedule stays usable: a well-formed step now runs on every rank.
      std::vector<tp::Tensor> losses;
      schedule.step(rank == 0 ? std::vector<tp::Tensor>{x} : std::vector<tp::Tensor>{},
                    {.target = y, .losses = &losses});
      if (rank == world - 1 && losses.size() != 4) {
        std::printf("rank %d: the step after the failure returned %zu losses\n", rank,
                    losses.size());
        return 1;
      }
      std::printf("rank %d: the next step ran\n", rank);
      return 0;
    } else if (args.misuse == "silent-rank") {
      // The last rank builds its stage but never steps: the others' step_timeout names it.
      expect = "did not finish within 1500 ms";
      RankStage own(world, rank);
      pp::Schedule1F1B schedule(own.stage, 4, tp::nn::mse_loss,
                                {.step_timeout = std::chrono::milliseconds(1500)});
      if (rank == world - 1) {
        std::this_thread::sleep_for(std::chrono::seconds(4));
        std::printf("rank %d: stayed silent\n", rank);
        return 0;
      }
      return expect_step_failure(
          schedule, rank, {expect, "rank " + std::to_string(world - 1) + ": no step started"},
          1.5 + 2.5);
    } else if (args.misuse == "dead-rank") {
      // The last rank dies (no clean-up, no step) while the others step: they fail within a few
      // seconds, naming it, instead of waiting out the step timeout.
      expect = "is gone";
      RankStage own(world, rank);
      pp::Schedule1F1B schedule(own.stage, 4, tp::nn::mse_loss,
                                {.step_timeout = std::chrono::seconds(60)});
      if (rank == world - 1) {
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        std::printf("rank %d: dying\n", rank);
        std::fflush(stdout);
        std::_Exit(0);  // abrupt, but exit 0 so the launcher lets the others finish
      }
      return expect_step_failure(schedule, rank, {expect, "rank " + std::to_string(world - 1)}, 15);
    } else {
      throw std::invalid_argument("unknown misuse case " + args.misuse);
    }
  } catch (const std::exception& e) {
    bool ok = !expect.empty() && std::string(e.what()).find(expect) != std::string::npos;
    std::printf("rank %d: %s error: %s\n", rank, ok ? "the expected" : "an UNEXPECTED", e.what());
    return ok ? 0 : 1;
  }
  std::printf("rank %d: no error for misuse case %s\n", rank, args.misuse.c_str());
  return 1;
}

// Collectives across processes: barrier, all_reduce (float32 and bfloat16, world and a subgroup,
// large and tiny, mismatched shapes), all_gather; last, a barrier one rank skips fails on the
// others naming it.
int collectives() {
  const int rank = dist::get_rank(), world = dist::get_world_size();
  int bad = 0;
  auto expect = [&](bool ok, const std::string& what) {
    if (!ok) {
      std::printf("rank %d: FAILED: %s\n", rank, what.c_str());
      ++bad;
    }
  };
  dist::barrier();
  for (tp::DType dtype : {tp::DType::Float32, tp::DType::BFloat16}) {
    tp::Tensor t = tp::full({5}, static_cast<float>(rank + 1)).to(dtype);
    dist::all_reduce(t);
    float want = world * (world + 1) / 2.0f;
    expect(t.dtype() == dtype, "all_reduce keeps the dtype");
    for (float v : t.to_vector()) expect(v == want, "all_reduce sums over the world");
  }
  {  // Every rank's own values over many elements, and fewer elements than ranks.
    for (int64_t n : {int64_t{100003}, int64_t{1}}) {
      std::vector<float> mine(n), want(n, 0.0f);
      for (int64_t i = 0; i < n; ++i) {
        mine[i] = static_cast<float>((i * 7 + rank * 3) % 17) - 8.0f;
        for (int r = 0; r < world; ++r) want[i] += static_cast<float>((i * 7 + r * 3) % 17) - 8.0f;
      }
      tp::Tensor t = tp::from_vector(mine, {n});
      dist::all_reduce(t);
      expect(t.to_vector() == want, "all_reduce of " + std::to_string(n) + " elements");
    }
  }
  try {  // A rank that passes another shape fails every rank at once, saying so.
    tp::Tensor t = tp::ones({rank == 0 ? 6 : 5});
    dist::all_reduce(t);
    expect(false, "an all_reduce of mismatched tensors returned");
  } catch (const dist::DistributedError& e) {
    // Rank 0's neighbours name its tensor, the others pass their reason on.
    const std::string what = e.what();
    expect(what.find("float32 tensor of 6 elements") != std::string::npos,
           "the mismatch is named: " + what);
  }
  dist::ProcessGroup ends = dist::new_group({0, world - 1});
  if (ends.contains(rank)) {
    tp::Tensor t = tp::full({2, 3}, static_cast<float>(rank));
    ends.all_reduce(t);
    for (float v : t.to_vector()) expect(v == world - 1, "all_reduce over a subgroup");
    expect(ends.all_gather_bytes(std::to_string(rank)) ==
               std::vector<std::string>{"0", std::to_string(world - 1)},
           "all_gather_bytes by group rank");
  }
  if (rank != 1) {
    auto t0 = std::chrono::steady_clock::now();
    try {
      dist::barrier();
      expect(false, "a barrier without rank 1 returned");
    } catch (const dist::DistributedError& e) {
      std::string what = e.what();
      double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      expect(what.find("did not take part") != std::string::npos &&
                 what.find("[1]") != std::string::npos,
             "the timeout names rank 1: " + what);
      expect(s > 4 && s < 15, "the barrier timed out in time (5 s)");
    }
  } else {
    std::this_thread::sleep_for(std::chrono::seconds(7));
  }
  std::printf("rank %d: collectives over %d processes: %s\n", rank, world,
              bad == 0 ? "all as expected" : "MISMATCHES");
  return bad == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    Args args = parse(argc, argv);
    bool coll = args.misuse == "collectives";
    // Collectives wait their group's timeout: short where the check waits for one on purpose.
    dist::init_process_group({.timeout = std::chrono::seconds(coll ? 5 : 60)});
    int rc = coll ? collectives() : args.misuse.empty() ? equivalence(args) : misuse(args);
    std::fflush(stdout);
    return rc;
  } catch (const std::exception& e) {
    std::printf("rank %d: failed: %s\n", dist::get_rank(), e.what());
    std::fflush(stdout);
    return 1;
  }
}
