// train_gpt's --plan and --profile-out (plan_job.h).
#include "plan_job.h"

#include <cstdio>
#include <filesystem>
#include <stdexcept>
#include <string_view>

#include "tensorplay/distributed/launch_env.h"
#include "tensorplay/distributed/process_group.h"
#include "tensorplay/nn/gpt.h"
#include "tensorplay/pipelining/planner/calibrate.h"
#include "tensorplay/pipelining/planner/plan.h"
#include "tensorplay/pipelining/planner/plan_report.h"
#include "tensorplay/pipelining/planner/profile_run.h"
#include "tensorplay/tensor.h"

namespace tp = tensorplay;
namespace pp = tensorplay::pipelining;
namespace dist = tensorplay::distributed;

namespace train_gpt {
namespace {

constexpr int kEmbeddedRanks = 2;  // --plan auto in one process plans for two stage actors
constexpr std::string_view kFailed = "failed: ";  // rank 0's answer when it could not plan

// Profiles here and plans `request`, printing the best few; keeps the plan and the profile in
// --log-dir (else --checkpoint-dir) for a later tp-trace --plan --profile.
pp::Plan plan_here(const Options& o, int64_t vocab, const pp::PlanRequest& request) {
  std::printf("plan auto: profiling the GPT's %lld blocks (a few seconds)...\n",
              static_cast<long long>(o.layers));
  std::fflush(stdout);
  const pp::Profile profile = profile_gpt(o, vocab);
  const pp::PlanResult result = pp::plan(profile, request);
  std::printf("plan auto:\n%s", pp::format_plan_report(result, 3).c_str());
  if (o.dp > 1)
    std::printf(
        "plan auto: planned one replica's pipeline of %d ranks on %lld sequences a step (--batch "
        "over --dp %d); the gradient averaging between replicas is not in the prediction\n",
        request.world, static_cast<long long>(request.batch), o.dp);
  pp::Plan plan = pp::make_plan(profile, result.best(), request.batch);
  const std::string dir = o.log_dir.empty() ? o.checkpoint_dir : o.log_dir;
  if (!dir.empty()) {
    std::filesystem::create_directories(dir);
    const std::string plan_path = dir + "/plan_auto.json", profile_path = dir + "/profile.json";
    pp::save_plan(plan, plan_path);
    pp::save_profile(profile, profile_path);
    std::printf("plan auto: wrote %s and %s (tp-trace --plan %s --profile %s)\n", plan_path.c_str(),
                profile_path.c_str(), plan_path.c_str(), profile_path.c_str());
  }
  return plan;
}

// Under tp-launch: rank 0 profiles its host and plans for ranks in processes of their own (their
// transfers over the profile's UCX channel, the cores shared by the host's ranks); every rank
// takes rank 0's plan, so all run the same one. Rank 0's failure reaches every rank.
pp::Plan shared_auto_plan(const Options& o, int64_t vocab, int world) {
  const dist::ProcessGroup group = dist::world_group();
  std::string mine;
  if (group.rank() == 0) {
    const pp::PlanRequest request{.world = world / o.dp,
                                  .memory_cap = o.memory_cap,
                                  .batch = o.batch / o.dp,
                                  .ranks_per_host = dist::read_launch_env().local_world_size,
                                  .one_process = false};
    try {
      mine = pp::plan_to_json(plan_here(o, vocab, request));
    } catch (const std::exception& e) {
      mine = std::string(kFailed) + e.what();
    }
  }
  const std::string text = group.all_gather_bytes(mine).at(0);
  if (text.starts_with(kFailed))
    throw std::runtime_error("--plan auto: rank 0 could not plan: " + text.substr(kFailed.size()));
  return pp::plan_from_json(text);
}

pp::Plan auto_plan(const Options& o, int64_t vocab, int world) {
  if (world > 1) return shared_auto_plan(o, vocab, world);
  return plan_here(o, vocab,
                   {.world = kEmbeddedRanks, .memory_cap = o.memory_cap, .batch = o.batch / o.dp});
}

}  // namespace

std::string profile_model_name(const Options& o) {
  return "train_gpt GPT (" + std::to_string(o.layers) + " blocks, width " +
         std::to_string(o.width) + ")";
}

namespace {

// A plan file is for the model it was profiled on: the same blocks (a plan for 4 blocks cuts a
// model of 6 as if the last two were not there) and, for train_gpt's own plans, the same width.
void check_plan_model(const pp::Plan& plan, const Options& o) {
  const std::string fix =
      ": pass the flags it was made with, or make a plan for this model (train_gpt --profile-out "
      "FILE with these flags, then tp-plan --profile FILE)";
  const std::string mine = profile_model_name(o);
  if (plan.model.rfind("train_gpt GPT (", 0) == 0 && plan.model != mine)
    throw std::invalid_argument("--plan " + o.plan + " was made for a " + plan.model +
                                ", but --layers " + std::to_string(o.layers) + " --width " +
                                std::to_string(o.width) + " make a " + mine + fix);
  std::vector<std::string> segments;
  for (const std::string& name : plan.segments)
    if (!name.empty()) segments.push_back(name);
  if (!segments.empty() && segments != split_candidates(o))
    throw std::invalid_argument("--plan " + o.plan + " was made for a model whose stages may " +
                                "begin at " + std::to_string(segments.size()) + " places (" +
                                segments.front() + " to " + segments.back() + "), but --layers " +
                                std::to_string(o.layers) + " gives " +
                                std::to_string(split_candidates(o).size()) + fix);
}

}  // namespace

std::vector<std::string> split_candidates(const Options& o) {
  std::vector<std::string> names;
  for (int64_t b = 0; b < o.layers; ++b) names.push_back("blocks." + std::to_string(b));
  names.push_back("ln_f");
  return names;
}

pp::Profile profile_gpt(const Options& o, int64_t vocab) {
  tp::manual_seed(o.seed);
  tp::nn::GPT model(tp::nn::GPTConfig{.vocab_size = vocab,
                                      .context_length = o.context,
                                      .n_layer = o.layers,
                                      .n_head = o.heads,
                                      .width = o.width,
                                      .dropout = o.dropout});
  if (o.dtype == "bfloat16") model->to(tp::DType::BFloat16);
  const int64_t rows = std::max<int64_t>(1, o.batch / o.dp / o.n_microbatches);
  pp::ProfileOptions options;
  options.candidates = split_candidates(o);
  options.device = tp::Device(o.device);
  options.model_name = profile_model_name(o);
  options.loss_fn = [vocab](const tp::Tensor& logits, const tp::Tensor& targets) {
    return tp::cross_entropy(logits.reshape({-1, vocab}), targets.reshape({-1}));
  };
  options.target = tp::zeros({rows, o.context});
  options.thread_counts = {1, 2};
  options.repeats = 5;
  // Also at 2 and 4 times the microbatch where the batch holds them: the search weighs fewer,
  // larger microbatches with times and a compute factor measured at their size.
  for (const int times : {2, 4})
    if (o.n_microbatches % times == 0) options.larger_microbatches.push_back(times);
  model->to(options.device);
  const std::vector<tp::Tensor> example = {tp::zeros({rows, o.context})};
  pp::Profile profile = pp::profile(*model.ptr(), example, options);
  if (!options.device.is_cuda())  // compute factors and time per action, from real runs
    pp::calibrate_profile(profile, *model.ptr(), example,
                          {.loss_fn = options.loss_fn, .target = options.target});
  return profile;
}

std::optional<pp::Plan> resolve_plan(Options& o, int64_t vocab, int world) {
  if (o.plan.empty()) return std::nullopt;
  if (o.unsplit) throw std::invalid_argument("--plan runs a pipeline; drop --unsplit");
  pp::Plan plan = o.plan == "auto" ? auto_plan(o, vocab, world) : pp::load_plan(o.plan);
  const int ranks = world > 1 ? world / o.dp : plan.ranks;  // embedded: any count fits
  pp::check_plan(plan, split_candidates(o), ranks, o.batch / o.dp);
  if (o.plan != "auto") check_plan_model(plan, o);
  o.schedule = std::string(tp::schedules::schedule_name(plan.schedule));
  o.stages = plan.num_stages();
  o.stages_from = "--plan " + o.plan;
  o.n_microbatches = plan.n_microbatches;
  o.blas_threads = plan.threads;
  return plan;
}

}  // namespace train_gpt
