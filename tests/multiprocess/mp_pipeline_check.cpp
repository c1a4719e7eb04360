// One rank of a multi-process pipeline check, started by tp-launch: trains a model with a tied
// weight on the first and last stage and a skip connection across stages under a schedule, and
// compares losses and every gradient with the embedded single-process run of the same model.
// With --dp N the ranks form a {pp, dp} device mesh: each replica trains on its share of the
// batch and the gradients are averaged. Also runs misuse cases: each must fail on every rank
// with a clear error, without hanging.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include "tensorplay/distributed/init_device_mesh.h"
#include "tensorplay/distributed/process_group.h"
#include "tensorplay/pipelining/pipe_split.h"
#include "tensorplay/pipelining/pipeline.h"
#include "tensorplay/pipelining/runtime/schedule.h"
#include "tensorplay/tensor.h"

namespace tp = tensorplay;
namespace pp = tensorplay::pipelining;
namespace sc = tensorplay::schedules;
namespace dist = tensorplay::distributed;

namespace {

constexpr int64_t kWidth = 16;

// layers.0 runs in stage 0, layers.i in stage i; the last stage reads layers.0's weight again
// (a tie across the first and last rank) and stage 0's output (a skip across every stage).
// Without `tie` the last stage has its own head instead.
struct TieSkipNetImpl : tp::nn::Module {
  explicit TieSkipNetImpl(int num_stages, bool tie = true) {
    layers = register_module("layers", tp::nn::ModuleList());
    for (int i = 0; i < num_stages - 1; ++i) layers->push_back(tp::nn::Linear(kWidth, kWidth));
    if (!tie) head = register_module("head", tp::nn::Linear(kWidth, kWidth));
  }
  tp::Tensor forward(const tp::Tensor& x) override {
    tp::Tensor h0 = tp::relu((*(*layers)[0])(x));
    tp::Tensor h = h0;
    for (size_t i = 1; i < layers->size(); ++i) {
      pp::pipe_split();
      h = tp::tanh((*(*layers)[i])(h));
    }
    pp::pipe_split();
    if (head) return head(h + h0);
    return tp::linear(h + h0, layers->at<tp::nn::LinearImpl>(0)->weight);
  }
  tp::nn::ModuleList layers{nullptr};
  tp::nn::Linear head{nullptr};
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
  int n_microbatches = 8;
  int steps = 3;
  std::string misuse;          // empty: the equivalence run
  std::string device = "cpu";  // "cuda": each rank's stages on its local GPU (NCCL or staged UCX)
  double tolerance = 1e-5;     // relative, of each value's size (at least 1)
  int dp = 1;                  // data-parallel replicas (a {pp, dp} mesh when more than 1)
  bool tie = true;             // the last stage reads the first stage's weight
  std::string recompute = "none";  // the local stages' policy (the reference never recomputes)
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--schedule")
      a.schedule = value;
    else if (flag == "--microbatches")
      a.n_microbatches = std::atoi(value.c_str());
    else if (flag == "--steps")
      a.steps = std::atoi(value.c_str());
    else if (flag == "--misuse")
      a.misuse = value;
    else if (flag == "--device")
      a.device = value;
    else if (flag == "--tolerance")
      a.tolerance = std::atof(value.c_str());
    else if (flag == "--dp")
      a.dp = std::atoi(value.c_str());
    else if (flag == "--tie")
      a.tie = value != "0";
    else if (flag == "--recompute")
      a.recompute = value;
    else
      throw std::invalid_argument("unknown flag " + flag);
  }
  return a;
}

// Values compared on this rank against the reference, and the mismatches (each printed).
struct Checker {
  int rank = 0;
  double tolerance = 0;
  int compared = 0, bad = 0;
  double worst = 0;

  void compare(const tp::Tensor& got, const tp::Tensor& want, const std::string& what) {
    double d = rel_diff(got, want);
    worst = std::max(worst, d);
    ++compared;
    if (d > tolerance) {
      std::printf("rank %d: %s differs by %g\n", rank, what.c_str(), d);
      ++bad;
    }
  }
};

// This rank's side of the equivalence run (its stages on a {pp, dp} mesh or the world group)
// and the reference: the same model unsplit in one process, over the whole batch.
struct EquivalenceJob {
  const Args& args;
  const int rank, world;
  sc::ScheduleKind kind;
  int pp_size = 1, num_stages = 1;
  // Each replica trains `microbatches` microbatches of 2 rows; the reference runs the whole batch.
  int64_t rows = 2, batch = 0;
  TieSkipNet model{nullptr}, twin{nullptr};
  tp::Device device = tp::cpu();
  dist::DeviceMesh mesh;
  std::vector<std::shared_ptr<pp::PipelineStage>> local, ref_stages;
  int pp_rank = 0, dp_rank = 0;
  std::unique_ptr<pp::PipelineSchedule> schedule, reference;
  std::unique_ptr<tp::optim::SGD> opt, ref_opt;
  bool hosts_first = false, hosts_last = false;
  tp::Generator data{23};
  Checker check;

  explicit EquivalenceJob(const Args& a)
      : args(a),
        rank(dist::get_rank()),
        world(dist::get_world_size()),
        kind(sc::parse_schedule_kind(a.schedule)) {
    int spr = sc::is_single_stage_per_rank(kind) ? 1 : sc::default_stages_per_rank(kind);
    if (args.dp < 1 || world % args.dp != 0)
      throw std::invalid_argument("--dp " + std::to_string(args.dp) + " does not divide the " +
                                  std::to_string(world) + " processes");
    pp_size = world / args.dp;
    num_stages = pp_size * spr;
    batch = rows * args.n_microbatches * args.dp;
    check.rank = rank;
    check.tolerance = args.tolerance;
  }

  // The models, both pipelines and their optimizers; false when the run needs a CUDA device
  // this rank lacks.
  bool build() {
    tp::manual_seed(11);
    model = TieSkipNet(num_stages, args.tie);
    twin = TieSkipNet(num_stages, args.tie);
    twin->load_state_dict(model->state_dict());
    if (args.dp > 1 && rank % args.dp != 0) {
      // Replicas other than the first start from other values: the schedule gives every replica
      // the first one's (as DDP does), so they still match the reference.
      tp::NoGradGuard no_grad;
      for (auto& [name, p] : model->named_parameters()) p.copy_(tp::randn(p.shape()));
    }
    auto pipe = pp::pipeline(model, {tp::zeros({rows, kWidth})});
    device = args.device == "cpu" ? tp::cpu() : dist::local_devices().at(0);
    if (args.device != "cpu" && !device.is_cuda()) return false;
    build_local(pipe);
    auto ref_pipe = pp::pipeline(twin, {tp::zeros({rows, kWidth})});
    ref_stages = pp::build_stages(ref_pipe, {tp::cpu()});
    reference = std::make_unique<pp::PipelineSchedule>(ref_stages, args.n_microbatches * args.dp,
                                                       tp::nn::mse_loss, kind);
    opt = std::make_unique<tp::optim::SGD>(pp::parameters(local),
                                           tp::optim::SGDOptions{.lr = 0.05f, .momentum = 0.9f});
    ref_opt = std::make_unique<tp::optim::SGD>(
        pp::parameters(ref_stages), tp::optim::SGDOptions{.lr = 0.05f, .momentum = 0.9f});
    hosts_first = local.front()->is_first();
    hosts_last = local.back()->is_last();
    return true;
  }

  void build_local(const pp::Pipe& pipe) {
    if (args.dp > 1) {
      mesh = dist::init_device_mesh(device.is_cuda() ? "cuda" : "cpu", {pp_size, args.dp},
                                    {"pp", "dp"});
      pp_rank = mesh.get_local_rank("pp");
      dp_rank = mesh.get_local_rank("dp");
      local = pp::build_stages(pipe, pp::stages_of_rank(kind, pp_rank, num_stages), device, mesh);
    } else {
      local = pp::build_stages(pipe, pp::stages_of_rank(kind, rank, num_stages), device,
                               dist::world_group());
    }
    for (auto& s : local) s->set_recompute(pp::RecomputePolicy::parse(args.recompute));
    if (args.recompute != "none" && !local.front()->is_last() &&
        local.front()->recomputed_modules().empty())
      throw std::logic_error("--recompute " + args.recompute + ": stage " +
                             std::to_string(local.front()->stage_index()) + " recomputes nothing");
    schedule =
        std::make_unique<pp::PipelineSchedule>(local, args.n_microbatches, tp::nn::mse_loss, kind);
    if (pp_size > 1 && !schedule->is_distributed())
      throw std::logic_error("the schedule did not go distributed");
  }

  // Every rank draws the whole batch (the same generator); a replica trains on its share.
  std::pair<tp::Tensor, tp::Tensor> draw() {
    tp::Tensor x = tp::randn({batch, kWidth}, {}, &data), y = tp::randn({batch, kWidth}, {}, &data);
    return std::make_pair(x, y);
  }

  tp::Tensor local_step(const tp::Tensor& x, const tp::Tensor& y, std::vector<tp::Tensor>* losses) {
    tp::Tensor mx = dist::shard_batch(x, mesh), my = dist::shard_batch(y, mesh);
    return schedule->step(
        hosts_first ? std::vector<tp::Tensor>{mx.to(device)} : std::vector<tp::Tensor>{},
        {.target = my.to(device), .losses = losses});
  }

  // The last step accumulates a batch under no_sync first: the synced step then averages both,
  // as the reference accumulates both.
  void step_without_sync() {
    auto [x, y] = draw();
    {
      auto guard = schedule->no_sync();
      local_step(x, y, nullptr);
    }
    if (schedule->data_parallel_stats().synced) {
      std::printf("rank %d: a step under no_sync averaged gradients\n", rank);
      ++check.bad;
    }
    reference->step({x}, {.target = y});
  }

  // One training step on both sides, and its losses, output and data-parallel averaging checked.
  void step_and_check_outputs(const std::string& at) {
    auto [x, y] = draw();
    std::vector<tp::Tensor> losses, ref_losses;
    tp::Tensor out = local_step(x, y, &losses);
    tp::Tensor ref_out = reference->step({x}, {.target = y, .losses = &ref_losses});
    if (hosts_last) {
      if (losses.size() != static_cast<size_t>(args.n_microbatches)) {
        std::printf("rank %d %s: %zu losses, expected %d\n", rank, at.c_str(), losses.size(),
                    args.n_microbatches);
        ++check.bad;
      }
      for (size_t mb = 0; mb < losses.size(); ++mb)
        check.compare(losses[mb], ref_losses.at(dp_rank * args.n_microbatches + mb),
                      at + ": loss of microbatch " + std::to_string(mb));
      check.compare(out, dist::shard_batch(ref_out, mesh), at + ": output");
    } else if (out.defined()) {
      std::printf("rank %d %s: a rank without the last stage got an output\n", rank, at.c_str());
      ++check.bad;
    }
    if (args.dp > 1) {
      pp::DataParallelStats st = schedule->data_parallel_stats();
      if (!st.synced || st.buckets < 1 || st.bytes <= 0) {
        std::printf("rank %d %s: no data-parallel averaging ran (%d buckets, %lld bytes)\n", rank,
                    at.c_str(), st.buckets, static_cast<long long>(st.bytes));
        ++check.bad;
      }
    }
  }

  // Every local parameter's gradient, then (after both optimizers step) its value.
  void check_gradients_and_update(const std::string& at) {
    for (const auto& s : local) {
      for (const auto& [name, p] : s->module().named_parameters()) {
        tp::Tensor want = ref_stages[s->stage_index()]->module().find_tensor(name).grad();
        if (!p.grad().defined() || !want.defined()) {
          std::printf("rank %d %s: stage %d %s has no gradient\n", rank, at.c_str(),
                      s->stage_index(), name.c_str());
          ++check.bad;
          continue;
        }
        check.compare(
            p.grad().cpu(), want,
            at + ": stage " + std::to_string(s->stage_index()) + " " + name + " gradient");
      }
    }
    opt->step();
    opt->zero_grad();
    ref_opt->step();
    ref_opt->zero_grad();
    for (const auto& s : local)
      for (const auto& [name, p] : s->module().named_parameters())
        check.compare(
            p.cpu(), ref_stages[s->stage_index()]->module().find_tensor(name),
            at + ": stage " + std::to_string(s->stage_index()) + " " + name + " after update");
  }

  // Forward only (eval) after the training steps: the same outputs and losses.
  void check_eval() {
    auto [x, y] = draw();
    std::vector<tp::Tensor> losses, ref_losses;
    tp::Tensor mx = dist::shard_batch(x, mesh), my = dist::shard_batch(y, mesh);
    tp::Tensor out = schedule->eval(
        hosts_first ? std::vector<tp::Tensor>{mx.to(device)} : std::vector<tp::Tensor>{},
        {.target = my.to(device), .losses = &losses});
    tp::Tensor ref_out = reference->eval({x}, {.target = y, .losses = &ref_losses});
    if (hosts_last) {
      check.compare(out, dist::shard_batch(ref_out, mesh), "eval output");
      for (size_t mb = 0; mb < losses.size(); ++mb)
        check.compare(losses[mb], ref_losses.at(dp_rank * args.n_microbatches + mb), "eval loss");
      if (losses.size() != static_cast<size_t>(args.n_microbatches)) ++check.bad;
    }
  }
};

int equivalence(const Args& args) {
  EquivalenceJob job(args);
  if (!job.build()) {
    std::printf("rank %d: no CUDA device: skipped\n", job.rank);
    return 77;
  }
  for (int step = 0; step < args.steps; ++step) {
    const std::string at = "step " + std::to_string(step);
    if (args.dp > 1 && step == args.steps - 1) job.step_without_sync();
    job.step_and_check_outputs(at);
    job.check_gradients_and_update(at);
  }
  job.check_eval();
  const Checker& c = job.check;
  std::printf(
      "rank %d: %s over %d processes (pp %d x dp %d), %d stages, %d steps, %s: %d values "
      "compared, largest relative difference %.3g, %d mismatches\n",
      job.rank, args.schedule.c_str(), job.world, job.pp_size, args.dp, job.num_stages, args.steps,
      args.tie ? "tied weight" : "no tied weight", c.compared, c.worst, c.bad);
  return c.bad == 0 && c.compared > 0 ? 0 : 1;
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

// A step fed inputs on every rank fails naming the misuse, and the next well-formed step runs.
int misuse_inputs_on_wrong_rank(int rank, int world, std::string& expect) {
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
    std::printf("rank %d: the step after the failure returned %zu losses\n", rank, losses.size());
    return 1;
  }
  std::printf("rank %d: the next step ran\n", rank);
  return 0;
}

// A replica whose step fails makes the other's averaging fail at once; the next step runs.
int misuse_dp_failed_replica(int rank, int world, std::string& expect) {
  // Rank 1's step fails (a target of the wrong width): rank 0's averaging of that step fails
  // at once naming it, not after the transfer timeout; the next step runs on both.
  auto mesh = dist::init_device_mesh("cpu", {1, world}, {"pp", "dp"});
  TieSkipNet model(2);
  auto pipe = pp::pipeline(model, {tp::zeros({2, kWidth})});
  auto stages = pp::build_stages(pipe, {0, 1}, tp::cpu(), mesh);
  pp::ScheduleZBVZeroBubble schedule(
      stages, 2, tp::nn::mse_loss,
      {.step_timeout = std::chrono::seconds(60), .transfer_timeout = std::chrono::seconds(60)});
  tp::Tensor x = tp::randn({4, kWidth}), y = tp::randn({4, kWidth});
  expect = rank == 1 ? "" : "rank 1 (a replica) failed step 1";
  auto t0 = std::chrono::steady_clock::now();
  std::string error;
  try {
    schedule.step({x}, {.target = rank == 1 ? tp::randn({4, kWidth + 1}) : y});
  } catch (const std::exception& e) {
    error = e.what();
  }
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  bool ok = !error.empty() && error.find(expect) != std::string::npos && s < 10;
  std::printf("rank %d: %s error after %.2f s: %s\n", rank, ok ? "the expected" : "an UNEXPECTED",
              s, error.empty() ? "(none)" : error.c_str());
  schedule.step({x}, {.target = y});  // both replicas again: the next step averages
  std::printf("rank %d: the next step ran (%d buckets averaged)\n", rank,
              schedule.data_parallel_stats().buckets);
  return ok && schedule.data_parallel_stats().buckets > 0 ? 0 : 1;
}

// Replicas built from different models are refused; a replica that dies fails the others' step.
int misuse_dp_replicas(const Args& args, int rank, int world, std::string& expect) {
  // Every rank a replica of a whole two-stage V pipeline ({1, world} mesh).
  auto mesh = dist::init_device_mesh("cpu", {1, world}, {"pp", "dp"});
  const bool mismatch = args.misuse == "dp-model-mismatch";
  TieSkipNet model(2, /*tie=*/!(mismatch && rank == 1));  // rank 1: an extra head
  auto pipe = pp::pipeline(model, {tp::zeros({2, kWidth})});
  auto stages = pp::build_stages(pipe, {0, 1}, tp::cpu(), mesh);
  expect = mismatch ? "their parameters differ" : "rank 1";
  pp::ScheduleZBVZeroBubble schedule(
      stages, 2, tp::nn::mse_loss,
      {.step_timeout = std::chrono::seconds(60), .transfer_timeout = std::chrono::seconds(30)});
  if (mismatch) {
    std::printf("rank %d: the mismatched replicas built their schedules\n", rank);
    return 1;
  }
  if (rank == 1) {
    std::printf("rank %d: dying\n", rank);
    std::fflush(stdout);
    std::_Exit(0);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  auto t0 = std::chrono::steady_clock::now();
  try {
    schedule.step({tp::randn({4, kWidth})}, {.target = tp::randn({4, kWidth})});
  } catch (const std::exception& e) {
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    bool ok = std::string(e.what()).find(expect) != std::string::npos && s < 15;
    std::printf("rank %d: %s error after %.2f s: %s\n", rank, ok ? "the expected" : "an UNEXPECTED",
                s, e.what());
    return ok ? 0 : 1;
  }
  std::printf("rank %d: the step finished without its replica\n", rank);
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
      return misuse_inputs_on_wrong_rank(rank, world, expect);
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
    } else if (args.misuse == "too-many-stages") {
      // Transfer tags number stages in 10 bits, the last value kept for collectives.
      expect = "a schedule across processes holds at most 1023";
      pp::PipelineStage stage(tp::nn::Linear(kWidth, kWidth).ptr(), rank, 4096, tp::cpu(),
                              std::vector<pp::TensorMeta>{{tp::Shape{2, kWidth}}},
                              std::vector<pp::TensorMeta>{{tp::Shape{2, kWidth}}});
      stage.set_mesh(dist::world_group());
      pp::ScheduleGPipe schedule(stage, 2, tp::nn::mse_loss);
    } else if (args.misuse == "dp-failed-replica") {
      return misuse_dp_failed_replica(rank, world, expect);
    } else if (args.misuse == "dp-model-mismatch" || args.misuse == "dp-dead-replica") {
      return misuse_dp_replicas(args, rank, world, expect);
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
