// Resuming a pipeline training run from a checkpoint
// (tensorplay/pipelining/checkpoints/checkpoint.h) under the stage actors: N steps straight equal K
// steps, a checkpoint, a fresh set of model, stages, schedule, optimizer and generators loaded from
// it, and N-K more steps, bit for bit (losses and final parameters).
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>

#include "tensorplay/nn/gpt.h"
#include "tensorplay/pipelining/build_stage.h"
#include "tensorplay/pipelining/checkpoints/checkpoint.h"
#include "tensorplay/pipelining/pipeline.h"
#include "tensorplay/pipelining/runtime/schedule.h"
#include "tensorplay/tensor.h"

namespace tp = tensorplay;
namespace pp = tensorplay::pipelining;
namespace sc = tensorplay::schedules;

namespace {

constexpr int64_t kVocab = 16, kContext = 8, kBatch = 8;
constexpr int kMicrobatches = 4;

tp::Tensor lm_loss(const tp::Tensor& logits, const tp::Tensor& targets) {
  return tp::cross_entropy(logits.reshape({-1, kVocab}), targets.reshape({-1}));
}

// One training job: a 4-stage GPT under `kind`, AdamW, batches drawn from its own generator.
struct Run {
  Run(sc::ScheduleKind kind, uint64_t seed) : data(seed + 1) {
    tp::manual_seed(seed);
    model = tp::nn::GPT(tp::nn::GPTConfig{
        .vocab_size = kVocab, .context_length = kContext, .n_layer = 4, .n_head = 2, .width = 16});
    auto pipe = pp::pipeline(model, {tp::zeros({kBatch / kMicrobatches, kContext})},
                             {.split_spec = {{"blocks.1", pp::SplitPoint::Beginning},
                                             {"blocks.2", pp::SplitPoint::Beginning},
                                             {"blocks.3", pp::SplitPoint::Beginning}}});
    stages = pp::build_stages(pipe, {tp::cpu()});
    schedule = std::make_unique<pp::PipelineSchedule>(stages, kMicrobatches, lm_loss, kind);
    opt = std::make_unique<tp::optim::AdamW>(pp::parameters(stages),
                                             tp::optim::AdamWOptions{.lr = 1e-2f});
  }
  // Steps first..last (inclusive); returns each step's microbatch losses.
  std::vector<std::vector<float>> train(int first, int last) {
    std::vector<std::vector<float>> all;
    for (int step = first; step <= last; ++step) {
      tp::Tensor idx = tp::randint(0, kVocab, {kBatch, kContext}, {}, &data);
      tp::Tensor targets = tp::randint(0, kVocab, {kBatch, kContext}, {}, &data);
      std::vector<tp::Tensor> losses;
      schedule->step({idx}, {.target = targets, .losses = &losses});
      tp::optim::clip_grad_norm(opt->parameters(), 1.0f);
      opt->step();
      opt->zero_grad();
      std::vector<float> values;
      for (const auto& l : losses) values.push_back(l.item());
      all.push_back(values);
    }
    return all;
  }
  std::vector<std::vector<float>> parameters() const {
    std::vector<std::vector<float>> all;
    for (const auto& p : opt->parameters()) all.push_back(p.to_vector());
    return all;
  }
  pp::CheckpointOptions checkpoint_options() { return {.generators = {{"data", &data}}}; }

  tp::Generator data;
  tp::nn::GPT model{nullptr};
  std::vector<std::shared_ptr<pp::PipelineStage>> stages;
  std::unique_ptr<pp::PipelineSchedule> schedule;
  std::unique_ptr<tp::optim::AdamW> opt;
};

void check_resume(sc::ScheduleKind kind) {
  namespace fs = std::filesystem;
  const std::string dir = (fs::temp_directory_path() / ("tp_resume_" + std::to_string(::getpid()) +
                                                        "_" + std::string(sc::schedule_name(kind))))
                              .string();
  fs::remove_all(dir);
  const int total = 5, stop = 2;

  std::vector<std::vector<float>> straight_losses, straight_parameters;
  {
    Run straight(kind, 11);
    straight_losses = straight.train(1, total);
    straight_parameters = straight.parameters();
  }

  std::vector<std::vector<float>> resumed_losses;
  {
    Run first(kind, 11);
    resumed_losses = first.train(1, stop);
    pp::save_checkpoint(dir, first.stages, *first.opt, stop, first.checkpoint_options());
  }
  Run second(kind, 12345);  // other initial weights, data generator and default generator
  REQUIRE(second.parameters() != straight_parameters);
  const int64_t step = pp::load_checkpoint(dir, second.stages, *second.opt, std::nullopt,
                                           second.checkpoint_options());
  REQUIRE(step == stop);
  for (auto& losses : second.train(static_cast<int>(step) + 1, total))
    resumed_losses.push_back(losses);
  fs::remove_all(dir);

  CHECK(resumed_losses == straight_losses);
  CHECK(second.parameters() == straight_parameters);
  // The run learned something, so equal losses are not equal by accident of a constant.
  CHECK(straight_losses.back() != straight_losses.front());
}

}  // namespace

TEST_CASE("a run resumed from a checkpoint continues bit for bit", "[checkpoint][resume]") {
  SECTION("1F1B") { check_resume(sc::ScheduleKind::OneFOneB); }
  SECTION("ZBVZeroBubble") { check_resume(sc::ScheduleKind::ZBVZeroBubble); }
}
