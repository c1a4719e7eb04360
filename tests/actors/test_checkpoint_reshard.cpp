// The reshard matrix in one process (tensorplay/pipelining/checkpoints/named_checkpoint.h under the
// stage actors): a GPT with a tied embedding and head, dropout generators named by module, trained
// by AdamW for 6 steps under layout A, saved, loaded into layout B and trained 6 more, equals B
// trained 6 steps from A's state at step 6: the losses of those 6 steps and the final parameters
// within 1e-6 relative. Layouts round a tied weight's gradient sum differently, so the reference
// starts B from A's step-6 state set in memory (the "start B from A's step-6 state").
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <map>

#include "tensorplay/pipelining/build_stage.h"
#include "tensorplay/pipelining/checkpoints/named_checkpoint.h"
#include "tensorplay/pipelining/pipeline.h"
#include "tensorplay/pipelining/runtime/schedule.h"
#include "tensorplay/tensor.h"

namespace tp = tensorplay;
namespace pp = tensorplay::pipelining;
namespace sc = tensorplay::schedules;

namespace {

constexpr int64_t kVocab = 16, kContext = 8, kBatch = 8;
constexpr int kMicrobatches = 4, kSteps = 6;

tp::Tensor lm_loss(const tp::Tensor& logits, const tp::Tensor& targets) {
  return tp::cross_entropy(logits.reshape({-1, kVocab}), targets.reshape({-1}));
}

// A pipeline layout: schedule, stage count (cuts before blocks), stages per rank.
struct Layout {
  sc::ScheduleKind kind;
  int num_stages;
  int stages_per_rank = 0;
  std::string name() const {
    return std::string(sc::schedule_name(kind)) + " " + std::to_string(num_stages) + " stages";
  }
};

// One training job under `layout`: GPT, AdamW, batches from the "data" generator, each dropout
// module drawing from its own generator named after its path in the model.
struct Run {
  Run(const Layout& layout, uint64_t seed) : data(seed + 1) {
    tp::manual_seed(seed);
    model = tp::nn::GPT(tp::nn::GPTConfig{.vocab_size = kVocab,
                                          .context_length = kContext,
                                          .n_layer = 4,
                                          .n_head = 2,
                                          .width = 16,
                                          .dropout = 0.1f});
    uint64_t next = seed + 100;
    for (auto& [path, module] : model->named_modules())
      if (auto* drop = dynamic_cast<tp::nn::DropoutImpl*>(module.get())) {
        dropout.push_back(std::make_unique<tp::Generator>(next++));
        drop->set_generator(dropout.back().get());
        names.push_back("dropout." + path);
      }
    pp::PipelineOptions options;
    const int per_stage = 4 / layout.num_stages;
    for (int s = 1; s < layout.num_stages; ++s)
      options.split_spec["blocks." + std::to_string(s * per_stage)] = pp::SplitPoint::Beginning;
    auto pipe = pp::pipeline(model, {tp::zeros({kBatch / kMicrobatches, kContext})}, options);
    stages = pp::build_stages(pipe, {tp::cpu()});
    schedule = std::make_unique<pp::PipelineSchedule>(
        stages, kMicrobatches, lm_loss, layout.kind,
        pp::ScheduleOptions{.stages_per_rank = layout.stages_per_rank});
    opt = std::make_unique<tp::optim::AdamW>(pp::parameters(stages),
                                             tp::optim::AdamWOptions{.lr = 1e-2f});
  }
  // Steps first..last: each step's microbatch losses.
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
  std::map<std::string, std::vector<float>> parameters() const {
    std::map<std::string, std::vector<float>> all;
    for (const auto& stage : stages)
      for (const auto& [name, t] : stage->module().state_dict()) all[name] = t.to_vector();
    return all;
  }
  pp::NamedCheckpointOptions checkpoint_options(int64_t samples = 0,
                                                const std::string& layout = "") {
    pp::NamedCheckpointOptions options{.samples_consumed = samples, .layout = layout};
    options.generators.emplace_back("data", &data);
    for (size_t i = 0; i < dropout.size(); ++i)
      options.generators.emplace_back(names[i], dropout[i].get());
    return options;
  }

  tp::Generator data;
  std::vector<std::unique_ptr<tp::Generator>> dropout;
  std::vector<std::string> names;
  tp::nn::GPT model{nullptr};
  std::vector<std::shared_ptr<pp::PipelineStage>> stages;
  std::unique_ptr<pp::PipelineSchedule> schedule;
  std::unique_ptr<tp::optim::AdamW> opt;
};

bool close(float a, float b) {
  return a == b || std::fabs(a - b) <= 1e-6f * std::max(std::fabs(a), std::fabs(b));
}
bool close(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (!close(a[i], b[i])) return false;
  return true;
}

// The reference's way from A to B, without files or the checkpoint code: B's state set in memory
// from A's by name (parameters, optimizer state, generators).
void copy_state(Run& from, Run& to) {
  const auto values = from.parameters();
  for (const auto& stage : to.stages)
    for (const auto& [name, t] : stage->module().state_dict())
      tp::Tensor(t).copy_(tp::from_vector(values.at(name), t.shape()));
  auto names = [](const Run& run) {
    std::map<const tp::TensorImpl*, std::string> by_tensor;
    for (const auto& stage : run.stages)
      for (const auto& [name, p] : stage->module().named_parameters())
        by_tensor.try_emplace(p.impl_ptr().get(), name);
    std::vector<std::string> all;
    for (const auto& p : run.opt->parameters()) all.push_back(by_tensor.at(p.impl_ptr().get()));
    return all;
  };
  const auto from_names = names(from), to_names = names(to);
  tp::StateDict dict;
  const auto state = from.opt->state_dict();
  for (const auto& [key, t] : state) {
    if (key.rfind("options.", 0) == 0) dict.insert(key, t);
    if (key.rfind("state.", 0) != 0) continue;
    const size_t dot = key.find('.', 6);
    const std::string& name = from_names.at(std::stoul(key.substr(6, dot - 6)));
    for (size_t j = 0; j < to_names.size(); ++j)
      if (to_names[j] == name)
        dict.insert_or_assign("state." + std::to_string(j) + key.substr(dot), t);
  }
  to.opt->load_state_dict(dict);
  to.data.engine() = from.data.engine();
  for (size_t i = 0; i < to.dropout.size(); ++i)
    to.dropout[i]->engine() = from.dropout[i]->engine();
}

void check_reshard(const Layout& a, const Layout& b) {
  namespace fs = std::filesystem;
  INFO(a.name() << " -> " << b.name());
  const std::string dir =
      (fs::temp_directory_path() / ("tp_reshard_" + std::to_string(::getpid()))).string();
  fs::remove_all(dir);

  Run first(a, 11);
  const auto first_losses = first.train(1, kSteps);
  pp::save_named_checkpoint(dir, first.stages, *first.opt, kSteps,
                            first.checkpoint_options(kSteps * kBatch, a.name()));
  const uint64_t default_state = tp::default_generator().engine()();  // the next draw after it

  // The reference: B from A's step-6 state, set in memory.
  Run reference(b, 11);
  copy_state(first, reference);
  const auto reference_losses = reference.train(kSteps + 1, 2 * kSteps);
  const auto reference_parameters = reference.parameters();

  Run second(b, 12345);  // other weights, data and dropout generators
  REQUIRE(second.parameters() != first.parameters());
  const auto info = pp::load_named_checkpoint(dir, second.stages, *second.opt, std::nullopt,
                                              second.checkpoint_options());
  fs::remove_all(dir);
  REQUIRE(info.step == kSteps);
  CHECK(info.samples_consumed == kSteps * kBatch);
  CHECK(info.layout == a.name());
  CHECK(info.num_stages == a.num_stages);
  CHECK(tp::default_generator().engine()() == default_state);
  const auto second_losses = second.train(kSteps + 1, 2 * kSteps);
  for (int s = 0; s < kSteps; ++s) CHECK(close(second_losses[s], reference_losses[s]));
  const auto second_parameters = second.parameters();
  REQUIRE(second_parameters.size() == reference_parameters.size());
  for (const auto& [name, values] : reference_parameters) {
    INFO(name);
    CHECK(close(second_parameters.at(name), values));
  }
  // The run learned something, so equal losses are not equal by accident of a constant.
  CHECK(reference_losses.back() != first_losses.front());
}

}  // namespace

TEST_CASE("reshard: 4 stages ZBV on 2 ranks resume as 2 stages 1F1B", "[checkpoint][reshard]") {
  check_reshard({sc::ScheduleKind::ZBVZeroBubble, 4, 2}, {sc::ScheduleKind::OneFOneB, 2});
}

TEST_CASE("reshard: GPipe resumes as Interleaved1F1B", "[checkpoint][reshard]") {
  check_reshard({sc::ScheduleKind::GPipe, 2}, {sc::ScheduleKind::Interleaved1F1B, 4, 2});
}

TEST_CASE("reshard: 1F1B pp 4 resumes as pp 2, and pp 2 as pp 4", "[checkpoint][reshard]") {
  SECTION("pp 4 -> pp 2") {
    check_reshard({sc::ScheduleKind::OneFOneB, 4}, {sc::ScheduleKind::OneFOneB, 2});
  }
  SECTION("pp 2 -> pp 4") {
    check_reshard({sc::ScheduleKind::OneFOneB, 2}, {sc::ScheduleKind::OneFOneB, 4});
  }
}

TEST_CASE("reshard: a pipeline resumes as one stage", "[checkpoint][reshard]") {
  check_reshard({sc::ScheduleKind::ZBVZeroBubble, 4, 2}, {sc::ScheduleKind::GPipe, 1});
}
