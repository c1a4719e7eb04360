// fully_shard inside pipeline stages (pipelining/runtime with distributed/fsdp/fully_shard.h):
// every schedule on a {pp 2, dp 2} mesh of four ranks joined in this process (one thread each),
// each stage sharded over its "dp" group, against the unsplit model on the whole batch; and the
// clear errors for stages sharded over another group or only in part.
#include <catch2/catch.hpp>
#include <chrono>
#include <cmath>
#include <map>
#include <set>
#include <sstream>

#include "in_process_job.h"
#include "log_capture.h"
#include "tensorplay/distributed/fsdp/fully_shard.h"
#include "tensorplay/nn.h"
#include "tensorplay/observe/trace_log.h"
#include "tensorplay/optim.h"
#include "tensorplay/pipelining/build_stage.h"
#include "tensorplay/pipelining/pipeline.h"
#include "tensorplay/pipelining/runtime/schedule.h"
#include "tensorplay/schedules/schedule_kind.h"
#include "tensorplay/tensor.h"

namespace tp = tensorplay;
namespace dist = tensorplay::distributed;
namespace fsdp = tensorplay::distributed::fsdp;
namespace pp = tensorplay::pipelining;
namespace sc = tensorplay::schedules;

namespace {

// Every dim 0 (7 and 5) is odd: no shard divides evenly over dp 2.
struct BlockImpl : tp::nn::Module {
  BlockImpl() {
    up = register_module("up", tp::nn::Linear(5, 7));
    down = register_module("down", tp::nn::Linear(7, 5));
  }
  tp::Tensor forward(const tp::Tensor& x) override { return down(tp::tanh(up(x))); }
  tp::nn::Linear up{nullptr}, down{nullptr};
};
TENSORPLAY_MODULE(Block);

struct NetImpl : tp::nn::Module {
  NetImpl() {
    for (int i = 0; i < 4; ++i) b.push_back(register_module("b" + std::to_string(i), Block()));
  }
  tp::Tensor forward(const tp::Tensor& x) override { return b[3](b[2](b[1](b[0](x)))); }
  std::vector<Block> b;
};
TENSORPLAY_MODULE(Net);

constexpr int kMicrobatches = 4;
constexpr int64_t kBatch = 16;  // dp 2 x 4 microbatches x 2 rows (dp 4: x 1 row)

tp::Tensor ramp(const tp::Shape& shape, float scale, float shift) {
  std::vector<float> v(static_cast<size_t>(tp::numel(shape)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = std::sin(scale * static_cast<float>(i) + shift);
  return tp::from_vector(v, shape);
}

/// Losses of 3 AdamW steps, the last step's gradients and the parameters after, by name (on a
/// sharded run: gathered over dp, padding rows after the parameter's own).
struct Run {
  std::vector<float> losses;
  std::map<std::string, std::vector<float>> grads, params;
  std::vector<int64_t> shard_rows;  ///< rows of each stage's parameters between steps
  /// This rank's memory_stats after the last step: parameter, gradient and optimizer bytes and
  /// the gathered-parameter high-water mark.
  int64_t parameter_bytes = 0, gradient_bytes = 0, optimizer_bytes = 0, gathered_bytes = 0;
  int blocks = 0;  ///< blocks on this rank
};

struct Case {
  sc::ScheduleKind kind = sc::ScheduleKind::GPipe;
  int pp = 2;  ///< pipeline ranks; dp = 4 / pp (pp 1: pure sharded data parallel)
  bool reshard_after_forward = true;
  bool recompute = false;
  /// Bad input: shard over a group of this rank alone, or one linear layer of each stage only.
  bool own_group = false, partly = false;
};

Run reference_run(const tp::StateDict& init) {
  Net net;
  net->load_state_dict(init);
  tp::optim::AdamW opt(net->parameters(), {.lr = 1e-2f});
  Run run;
  for (int step = 0; step < 3; ++step) {
    opt.zero_grad();
    tp::Tensor loss =
        tp::mse_loss(net(ramp({kBatch, 5}, 0.37f, 0.1f * step)), ramp({kBatch, 5}, 0.11f, 1.0f));
    loss.backward();
    run.losses.push_back(loss.item());
    if (step == 2)
      for (auto& [name, p] : net->named_parameters()) run.grads[name] = p.grad().to_vector();
    opt.step();
  }
  for (auto& [name, p] : net->named_parameters()) run.params[name] = p.to_vector();
  return run;
}

std::vector<float> gathered(const tp::Tensor& shard, const dist::ProcessGroup& dp) {
  tp::Tensor rows = shard.reshape({shard.size(0), -1});
  tp::Tensor all = tp::zeros({rows.size(0) * dp.size(), rows.size(1)});
  dp.all_gather_into_tensor(all, rows);
  return all.to_vector();
}

/// Each stage's blocks sharded, then the stage (or, for `c.partly`, one linear layer only);
/// each block recomputed first under `c.recompute`.
void shard_stages(const std::vector<std::shared_ptr<pp::PipelineStage>>& stages, const Case& c,
                  const fsdp::FullyShardOptions& options) {
  for (auto& s : stages) {
    if (c.recompute) {
      s->set_recompute(
          pp::RecomputePolicy::by_type({s->module().named_children().front().second->type_name()}));
      if (s->recomputed_modules().empty()) throw std::logic_error("nothing recomputed");
    }
    if (c.partly) {
      fsdp::fully_shard(
          s->module().named_children().front().second->named_children().front().second, options);
      continue;
    }
    for (auto& [name, block] : s->module().named_children()) fsdp::fully_shard(block, options);
    fsdp::fully_shard(s->module_ptr(), options);
  }
}

/// This rank's side: its stages of a pipeline over the {pp, dp} mesh (4 ranks), each sharded over
/// "dp", trained 3 AdamW steps on its dp share of the batch. Losses only where the last stage is.
Run sharded_run(dist::ProcessGroup& world, const tp::StateDict& init, const Case& c) {
  const int rank = world.global_rank();
  Net model;
  model->load_state_dict(init);
  const int per_rank =
      sc::is_single_stage_per_rank(c.kind) ? 1 : sc::default_stages_per_rank(c.kind);
  const int num_stages = c.pp * per_rank;
  pp::SplitSpec split;
  for (int s = 1; s < num_stages; ++s)
    split["b" + std::to_string(s * 4 / num_stages)] = pp::SplitPoint::Beginning;
  auto pipe = pp::pipeline(model, {tp::zeros({2, 5})}, {.split_spec = split});
  const dist::DeviceMesh job = world;
  const dist::DeviceMesh mesh =
      dist::DeviceMesh("cpu", {c.pp, 4 / c.pp}, {"pp", "dp"}, rank).with_job(job.job());
  const dist::ProcessGroup dp = mesh["dp"];
  auto stages = pp::build_stages(
      pipe, pp::stages_of_rank(c.kind, mesh.get_local_rank("pp"), num_stages), tp::cpu(), mesh);
  const fsdp::FullyShardOptions options{.mesh = c.own_group ? world.new_group({rank}) : dp,
                                        .reshard_after_forward = c.reshard_after_forward};
  shard_stages(stages, c, options);
  tp::optim::AdamW opt(pp::parameters(stages), {.lr = 1e-2f});
  pp::PipelineSchedule schedule(stages, kMicrobatches, tp::nn::mse_loss, c.kind,
                                {.step_timeout = std::chrono::seconds(60)});
  bool hosts_first = false, hosts_last = false;
  for (auto& s : stages) hosts_first |= s->is_first(), hosts_last |= s->is_last();
  Run run;
  for (int step = 0; step < 3; ++step) {
    opt.zero_grad();
    tp::Tensor x = dist::shard_batch(ramp({kBatch, 5}, 0.37f, 0.1f * step), mesh);
    tp::Tensor y = dist::shard_batch(ramp({kBatch, 5}, 0.11f, 1.0f), mesh);
    std::vector<tp::Tensor> losses;
    schedule.step(hosts_first ? std::vector<tp::Tensor>{x} : std::vector<tp::Tensor>{},
                  {.target = y, .losses = &losses});
    float mine = 0;
    for (const tp::Tensor& l : losses) mine += l.item() / static_cast<float>(losses.size());
    tp::Tensor both = tp::from_vector({mine}, {1});
    dp.all_reduce(both);
    if (hosts_last) run.losses.push_back(both.item() / static_cast<float>(dp.size()));
    if (step == 2) {
      const pp::MemoryStats memory = schedule.memory_stats(&opt);
      for (const pp::RankMemoryStats& r : memory.ranks) {
        run.parameter_bytes += r.parameter_bytes;
        run.gradient_bytes += r.gradient_bytes;
        run.optimizer_bytes += r.optimizer_bytes;
        run.gathered_bytes = std::max(run.gathered_bytes, r.peak_gathered_parameter_bytes);
      }
      for (auto& s : stages) run.blocks += static_cast<int>(s->module().named_children().size());
    }
    if (step == 2)
      for (auto& s : stages)
        for (auto& [name, p] : s->module().named_parameters())
          run.grads[name] = gathered(p.grad(), dp);
    opt.step();
  }
  for (auto& s : stages)
    for (auto& [name, p] : s->module().named_parameters()) {
      run.params[name] = gathered(p, dp);
      run.shard_rows.push_back(p.size(0));
    }
  return run;
}

/// The largest |a - b| over b's values (a may hold padding after them).
float max_diff(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() < b.size()) return INFINITY;
  float d = 0;
  for (size_t i = 0; i < b.size(); ++i) d = std::max(d, std::abs(a[i] - b[i]));
  return d;
}

tp::StateDict initial_state() {
  tp::manual_seed(7);
  Net net;
  tp::StateDict out;
  for (auto& [name, t] : net->state_dict()) out.insert(name, t.clone().detach());
  return out;
}

/// Runs `c` on four ranks; each rank's run and error.
std::pair<std::vector<Run>, std::vector<std::string>> run_case(const tp::StateDict& init,
                                                               const Case& c) {
  std::vector<Run> runs(4);
  auto outcomes = tp::testing::run_ranks(4, {0, 1, 2, 3}, std::chrono::seconds(30), [&](auto& g) {
    runs[g.global_rank()] = sharded_run(g, init, c);
  });
  std::vector<std::string> errors;
  for (const auto& o : outcomes) errors.push_back(o.error);
  return {runs, errors};
}

void check_case(const tp::StateDict& init, const Run& ref, const Case& c) {
  auto [runs, errors] = run_case(init, c);
  // float32 rounding: the microbatches' and replicas' gradients are summed in another order.
  const float tol = 2e-6f;
  int with_losses = 0;
  std::set<std::string> seen;
  for (int r = 0; r < 4; ++r) {
    INFO("rank " << r);
    REQUIRE(errors[r] == "");
    if (!runs[r].losses.empty()) {
      ++with_losses;
      REQUIRE(runs[r].losses.size() == 3);
      for (int s = 0; s < 3; ++s) CHECK(std::abs(runs[r].losses[s] - ref.losses[s]) <= tol);
    }
    for (auto& [name, g] : runs[r].grads) {
      INFO("gradient " << name);
      seen.insert(name);
      CHECK(max_diff(g, ref.grads.at(name)) <= tol);
    }
    for (auto& [name, p] : runs[r].params) {
      INFO("parameter " << name);
      CHECK(max_diff(p, ref.params.at(name)) <= tol);
    }
    // Shards between steps: on dp 2, 7 rows -> 4 per member (padded), 5 -> 3; on dp 4, 2 and 2.
    const int64_t up = c.pp == 2 ? 4 : 2, down = c.pp == 2 ? 3 : 2;
    for (int64_t rows : runs[r].shard_rows) CHECK((rows == up || rows == down));
    // memory_stats: a block's shards are up x 5 + up + down x 7 + down floats, its whole
    // parameters 7x5 + 7 + 5x7 + 5, gathered at once for the rank's stages; AdamW keeps two
    // moments.
    const int64_t shard = (up * 5 + up + down * 7 + down) * 4, full = (7 * 5 + 7 + 5 * 7 + 5) * 4;
    CHECK(runs[r].blocks * c.pp == 4);  // 4 blocks over pp ranks
    CHECK(runs[r].parameter_bytes == runs[r].blocks * shard);
    CHECK(runs[r].gradient_bytes == runs[r].blocks * shard);
    CHECK(runs[r].optimizer_bytes >= 2 * runs[r].blocks * shard);
    CHECK(runs[r].gathered_bytes == runs[r].blocks * full);
  }
  CHECK(with_losses == 4 / c.pp);          // the last stage's replicas
  CHECK(seen.size() == ref.grads.size());  // every parameter checked somewhere
}

}  // namespace

TEST_CASE("every schedule trains fully_shard-ed stages on pp 2 x dp 2 as the unsplit model",
          "[fsdp][pipeline][multiprocess]") {
  dist::destroy_process_group();
  const tp::StateDict init = initial_state();
  const Run ref = reference_run(init);
  REQUIRE(ref.losses[2] < ref.losses[0]);
  for (sc::ScheduleKind kind : sc::all_schedule_kinds()) {
    INFO(sc::schedule_name(kind));
    check_case(init, ref, {.kind = kind});
  }
}

TEST_CASE(
    "sharded stages train alike with reshard_after_forward off, with recomputation and on "
    "pp 1 x dp 4",
    "[fsdp][pipeline][multiprocess]") {
  dist::destroy_process_group();
  const tp::StateDict init = initial_state();
  const Run ref = reference_run(init);
  SECTION("1F1B, reshard_after_forward off") {
    check_case(init, ref, {.kind = sc::ScheduleKind::OneFOneB, .reshard_after_forward = false});
  }
  SECTION("ZBVZeroBubble (split backward), each block recomputed") {
    check_case(init, ref, {.kind = sc::ScheduleKind::ZBVZeroBubble, .recompute = true});
  }
  SECTION("Interleaved1F1B, each block recomputed") {
    check_case(init, ref, {.kind = sc::ScheduleKind::Interleaved1F1B, .recompute = true});
  }
  SECTION("pp 1 x dp 4 (pure sharded data parallel): 1F1B, and Interleaved1F1B's two stages") {
    check_case(init, ref, {.kind = sc::ScheduleKind::OneFOneB, .pp = 1});
    check_case(init, ref, {.kind = sc::ScheduleKind::Interleaved1F1B, .pp = 1});
  }
}

TEST_CASE("stages sharded over another group than their dp group, or in part, are refused clearly",
          "[fsdp][pipeline][multiprocess]") {
  dist::destroy_process_group();
  const tp::StateDict init = initial_state();
  auto [own, own_errors] = run_case(init, {.kind = sc::ScheduleKind::OneFOneB, .own_group = true});
  auto [part, part_errors] = run_case(init, {.kind = sc::ScheduleKind::OneFOneB, .partly = true});
  for (int r = 0; r < 4; ++r) {
    INFO("rank " << r);
    CHECK_THAT(own_errors[r], Catch::Contains("holds a module sharded over ranks [") &&
                                  Catch::Contains("but the stage's \"dp\" group is [") &&
                                  Catch::Contains("pass mesh[\"dp\"]"));
    CHECK_THAT(part_errors[r], Catch::Contains("is not sharded while others are") &&
                                   Catch::Contains("apply fully_shard to the stage's root module"));
  }
}

TEST_CASE("the message log records each sharded stage's UNSHARD, REDUCE_GRAD and RESHARD per step",
          "[fsdp][pipeline][multiprocess]") {
  dist::destroy_process_group();
  const tp::StateDict init = initial_state();
  std::vector<std::string> errors;
  const std::string log = log_capture::capture_message_log(
      [&] { errors = run_case(init, {.kind = sc::ScheduleKind::ZBVZeroBubble}).second; },
      /*debug=*/true);
  for (const std::string& e : errors) CHECK(e == "");
  std::istringstream in(log);
  const std::vector<pp::LogEvent> events = pp::parse_message_log(in);
  // ZBV on pp 2: stages 0 and 3 on rank 0, 1 and 2 on rank 1; two replicas log each rank.
  std::map<std::string, int> started;
  std::map<std::pair<uint64_t, std::string>, int> first_forward, unshard, reduce, reshard;
  for (size_t i = 0; i < events.size(); ++i) {
    const pp::LogEvent& e = events[i];
    if (e.event != "start") continue;
    const sc::Action a = sc::parse_action(e.what);
    const std::string stage = std::to_string(a.stage);
    const auto key = std::make_pair(e.step, stage);
    const int at = static_cast<int>(i);
    if (a.kind == sc::ActionKind::Unshard) ++started["UNSHARD " + stage], unshard.emplace(key, at);
    if (a.kind == sc::ActionKind::ReduceGrad) ++started["REDUCE_GRAD " + stage], reduce[key] = at;
    if (a.kind == sc::ActionKind::Reshard) ++started["RESHARD " + stage], reshard[key] = at;
    if (a.kind == sc::ActionKind::Forward) first_forward.emplace(key, at);
  }
  for (int stage = 0; stage < 4; ++stage) {
    const std::string s = std::to_string(stage);
    INFO("stage " << s);
    for (const char* kind : {"UNSHARD ", "REDUCE_GRAD ", "RESHARD "})
      CHECK(started[kind + s] == 2 * 3);  // two replicas, three steps
    int steps = 0;
    for (const auto& [key, at] : unshard) {
      if (key.second != s) continue;
      ++steps;
      CHECK(at < first_forward.at(key));
      CHECK(reduce.at(key) < reshard.at(key));
    }
    CHECK(steps == 3);
  }
}
