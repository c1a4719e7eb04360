// Tests for checkpoint.h: a round trip of parameters, optimizer state, step and generators; steps
// that some stage has not finished are ignored; truncated, corrupted and mismatched files are
// clear errors. Resuming a schedule's training run is checked in tests/actors.

#include <filesystem>
#include <fstream>

#include "models.h"
#include "tensorplay/pipelining/checkpoints/checkpoint.h"
#include "tensors/temp_path.h"

using namespace stages_test;
namespace fs = std::filesystem;

namespace {

using test_files::TempDir;

// Two stages of an MLP stack, an AdamW over them that has taken two steps on random gradients.
struct Job {
  explicit Job(uint64_t seed) {
    tp::manual_seed(seed);
    model = std::make_unique<MlpStack>(8, 4);
    auto pipe = pp::pipeline(*model, {tp::zeros({2, 8})},
                             {.split_spec = {{"layers.2", pp::SplitPoint::Beginning}}});
    stages = pp::build_stages(pipe, {tp::cpu()});
    opt = std::make_unique<tp::optim::AdamW>(pp::parameters(stages), tp::optim::AdamWOptions{});
  }
  void train(uint64_t seed) {
    tp::Generator g(seed);
    for (int s = 0; s < 2; ++s) {
      for (tp::Tensor p : opt->parameters()) p.set_grad(tp::randn(p.shape(), {}, &g));
      opt->step();
      opt->zero_grad();
    }
  }
  std::vector<std::vector<float>> values() const {
    std::vector<std::vector<float>> all;
    for (const auto& p : opt->parameters()) all.push_back(p.to_vector());
    for (const auto& [key, t] : opt->state_dict()) all.push_back(t.to_vector());
    return all;
  }
  std::unique_ptr<MlpStack> model;
  std::vector<std::shared_ptr<pp::PipelineStage>> stages;
  std::unique_ptr<tp::optim::AdamW> opt;
};

}  // namespace

TEST_CASE("a checkpoint restores parameters, optimizer state, step and generators",
          "[checkpoint]") {
  TempDir dir;
  Job saved(1);
  saved.train(2);
  tp::Generator sampler(77);
  sampler.uniform();
  tp::manual_seed(123);
  pp::save_checkpoint(dir.path, saved.stages, *saved.opt, 40,
                      {.generators = {{"sampler", &sampler}}});
  const double next_default = tp::default_generator().uniform();
  const double next_sampler = sampler.uniform();
  CHECK(fs::exists(dir.path + "/step_00000040/stage_0.tpsd"));
  CHECK(fs::exists(dir.path + "/step_00000040/stage_1.done"));

  Job fresh(9);  // other initial values, no optimizer state
  REQUIRE(fresh.values() != saved.values());
  tp::Generator other_sampler(5);
  tp::manual_seed(999);
  CHECK(pp::load_checkpoint(dir.path, fresh.stages, *fresh.opt, std::nullopt,
                            {.generators = {{"sampler", &other_sampler}}}) == 40);
  CHECK(fresh.values() == saved.values());
  CHECK(tp::default_generator().uniform() == next_default);
  CHECK(other_sampler.uniform() == next_sampler);
  // Both continue the same way.
  saved.train(3);
  fresh.train(3);
  CHECK(fresh.values() == saved.values());
}

TEST_CASE("each process saves its own stages and a step is complete when all have",
          "[checkpoint]") {
  TempDir dir;
  Job job(3);
  job.train(4);
  // Stage 0 alone (as rank 0 of two processes would save it): not complete yet.
  auto opt0 = tp::optim::AdamW(pp::parameters({job.stages[0]}));
  pp::save_checkpoint(dir.path, {job.stages[0]}, opt0, 10);
  CHECK(pp::complete_checkpoint_steps(dir.path, 2).empty());
  CHECK_THROWS_WITH(pp::load_checkpoint(dir.path, job.stages, *job.opt),
                    Catch::Contains("no complete checkpoint") && Catch::Contains("10"));
  auto opt1 = tp::optim::AdamW(pp::parameters({job.stages[1]}));
  pp::save_checkpoint(dir.path, {job.stages[1]}, opt1, 10);
  CHECK(pp::complete_checkpoint_steps(dir.path, 2) == std::vector<int64_t>{10});

  // A newer step that one rank did not finish is skipped; asking for it is an error.
  pp::save_checkpoint(dir.path, {job.stages[0]}, opt0, 20);
  CHECK(pp::latest_checkpoint_step(dir.path, 2) == 10);
  CHECK(pp::load_checkpoint(dir.path, {job.stages[1]}, opt1) == 10);
  CHECK_THROWS_WITH(pp::load_checkpoint(dir.path, {job.stages[1]}, opt1, 20),
                    Catch::Contains("incomplete"));
  CHECK_THROWS_WITH(pp::load_checkpoint(dir.path, {job.stages[1]}, opt1, 30),
                    Catch::Contains("no step 30"));
  CHECK_FALSE(pp::latest_checkpoint_step(dir.path + "/missing", 2).has_value());
}

TEST_CASE("a truncated or corrupted checkpoint file is a clear error", "[checkpoint]") {
  TempDir dir;
  Job job(5);
  job.train(6);
  pp::save_checkpoint(dir.path, job.stages, *job.opt, 7);
  const std::string file = dir.path + "/step_00000007/stage_1.tpsd";
  const auto before = job.values();

  SECTION("truncated") {
    fs::resize_file(file, fs::file_size(file) / 2);
    CHECK_THROWS_AS(pp::load_checkpoint(dir.path, job.stages, *job.opt), pp::CheckpointError);
    CHECK_THROWS_WITH(pp::load_checkpoint(dir.path, job.stages, *job.opt),
                      Catch::Contains("stage_1.tpsd") && Catch::Contains("truncated") &&
                          Catch::Contains("earlier step"));
  }
  SECTION("a flipped byte") {
    test_files::flip_byte(file, static_cast<std::streamoff>(fs::file_size(file) - 3));
    CHECK_THROWS_WITH(pp::load_checkpoint(dir.path, job.stages, *job.opt),
                      Catch::Contains("stage_1.tpsd") && Catch::Contains("corrupted"));
  }
  SECTION("a missing stage file") {
    fs::remove(file);
    CHECK_THROWS_WITH(pp::load_checkpoint(dir.path, job.stages, *job.opt),
                      Catch::Contains("cannot open") && Catch::Contains("stage_1.tpsd"));
  }
  // Nothing was changed by the failed loads.
  CHECK(job.values() == before);
}

TEST_CASE("a checkpoint of another split or optimizer does not load", "[checkpoint]") {
  TempDir dir;
  Job job(8);
  job.train(9);
  pp::save_checkpoint(dir.path, job.stages, *job.opt, 1);

  // Three stages of the same model: stage counts differ, so no step is complete for them.
  tp::manual_seed(8);
  MlpStack model(8, 4);
  auto pipe = pp::pipeline(model, {tp::zeros({2, 8})},
                           {.split_spec = {{"layers.1", pp::SplitPoint::Beginning},
                                           {"layers.2", pp::SplitPoint::Beginning}}});
  auto three = pp::build_stages(pipe, {tp::cpu()});
  tp::optim::AdamW opt3(pp::parameters(three));
  CHECK_THROWS_WITH(pp::load_checkpoint(dir.path, three, opt3),
                    Catch::Contains("no complete checkpoint of 3 stages"));

  // An optimizer over parameters of no given stage cannot be saved.
  tp::optim::AdamW all(pp::parameters(job.stages));
  CHECK_THROWS_WITH(pp::save_checkpoint(dir.path, {job.stages[0]}, all, 2),
                    Catch::Contains("belongs to none of the stages"));
  // A generator that was not saved.
  tp::Generator extra(1);
  CHECK_THROWS_WITH(pp::load_checkpoint(dir.path, job.stages, *job.opt, std::nullopt,
                                        {.generators = {{"extra", &extra}}}),
                    Catch::Contains("generator 'extra'"));
}

TEST_CASE("a stage replicated over a dp dimension is written by its first replica only",
          "[checkpoint]") {
  TempDir dir;
  Job job(5);
  job.train(6);
  // Replica 1 of a {1, 2} mesh: writes nothing, and the step is not complete.
  for (auto& s : job.stages)
    s->set_mesh(tp::distributed::DeviceMesh("cpu", {1, 2}, {"pp", "dp"}, 1));
  pp::save_checkpoint(dir.path, job.stages, *job.opt, 7);
  CHECK_FALSE(fs::exists(dir.path + "/step_00000007"));
  // Replica 0 writes; both replicas load it.
  for (auto& s : job.stages)
    s->set_mesh(tp::distributed::DeviceMesh("cpu", {1, 2}, {"pp", "dp"}, 0));
  pp::save_checkpoint(dir.path, job.stages, *job.opt, 7);
  CHECK(pp::latest_checkpoint_step(dir.path, 2) == 7);
  Job replica(8);
  for (auto& s : replica.stages)
    s->set_mesh(tp::distributed::DeviceMesh("cpu", {1, 2}, {"pp", "dp"}, 1));
  CHECK(pp::load_checkpoint(dir.path, replica.stages, *replica.opt) == 7);
  CHECK(replica.values() == job.values());
}
