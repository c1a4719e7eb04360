// Tests for named_checkpoint.h: a round trip by name, loading into another split (stage count,
// stages per process), a tied weight saved once, steps some writer has not finished, version-2
// files, and misuse (another model, another size, a truncated index, damaged bytes), each a clear
// error naming the tensor or file with nothing changed.

#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>

#include "fake_replicas.h"
#include "models.h"
#include "tensorplay/pipelining/checkpoints/checkpoint_index.h"
#include "tensorplay/pipelining/checkpoints/checkpoint_io.h"
#include "tensorplay/pipelining/checkpoints/named_checkpoint.h"
#include "tensors/temp_path.h"

using namespace stages_test;
namespace fs = std::filesystem;

namespace {

using test_files::TempDir;

// An MLP stack of `depth` blocks of width `dim`, split before each block in `cuts`, with an
// AdamW over all stages.
struct Job {
  Job(uint64_t seed, std::vector<int> cuts, int depth = 4, int64_t dim = 8) {
    tp::manual_seed(seed);
    model = std::make_unique<MlpStack>(dim, depth);
    pp::PipelineOptions options;
    for (int c : cuts)
      options.split_spec["layers." + std::to_string(c)] = pp::SplitPoint::Beginning;
    auto pipe = pp::pipeline(*model, {tp::zeros({2, dim})}, options);
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
  // Parameters and optimizer state by parameter name, whatever the split.
  std::map<std::string, std::vector<float>> by_name() const {
    std::map<std::string, std::vector<float>> all;
    std::map<const tp::TensorImpl*, std::string> names;
    for (const auto& stage : stages)
      for (const auto& [name, p] : stage->module().named_parameters()) {
        all[name] = p.to_vector();
        names[p.impl_ptr().get()] = name;
      }
    const auto state = opt->state_dict();
    for (size_t i = 0; i < opt->parameters().size(); ++i)
      for (const char* key : {"exp_avg", "exp_avg_sq", "step"})
        if (const tp::Tensor* t = state.find("state." + std::to_string(i) + "." + key))
          all[names.at(opt->parameters()[i].impl_ptr().get()) + "#" + key] = t->to_vector();
    return all;
  }
  std::unique_ptr<MlpStack> model;
  std::vector<std::shared_ptr<pp::PipelineStage>> stages;
  std::unique_ptr<tp::optim::AdamW> opt;
};

std::string index_path(const std::string& dir, int64_t step, int first_stage = 0) {
  return pp::checkpoint_io::step_folder(dir, step) + "/index_s" + std::to_string(first_stage) +
         ".txt";
}

// Every value's bits, by name (NaN and -0 compare as bits).
std::map<std::string, std::vector<uint32_t>> bits_of(
    const std::map<std::string, std::vector<float>>& all) {
  std::map<std::string, std::vector<uint32_t>> out;
  for (const auto& [name, values] : all) {
    auto& b = out[name];
    b.resize(values.size());
    if (!values.empty()) std::memcpy(b.data(), values.data(), values.size() * sizeof(float));
  }
  return out;
}

}  // namespace

TEST_CASE("a named checkpoint restores parameters, optimizer state, step, samples, generators",
          "[checkpoint][named]") {
  TempDir dir;
  Job saved(1, {2});
  saved.train(2);
  tp::Generator sampler(77);
  sampler.uniform();
  tp::manual_seed(123);
  pp::save_named_checkpoint(
      dir.path, saved.stages, *saved.opt, 40,
      {.generators = {{"data", &sampler}}, .samples_consumed = 320, .layout = "pp 2 x dp 1"});
  const double next_default = tp::default_generator().uniform();
  const double next_sampler = sampler.uniform();
  CHECK(fs::exists(index_path(dir.path, 40)));

  Job fresh(9, {2});
  REQUIRE(fresh.by_name() != saved.by_name());
  tp::Generator other(5);
  tp::manual_seed(999);
  const auto info = pp::load_named_checkpoint(dir.path, fresh.stages, *fresh.opt, std::nullopt,
                                              {.generators = {{"data", &other}}});
  CHECK(info.step == 40);
  CHECK(info.samples_consumed == 320);
  CHECK(info.num_stages == 2);
  CHECK(info.layout == "pp 2 x dp 1");
  CHECK(info.version == 3);
  CHECK(fresh.by_name() == saved.by_name());
  CHECK(tp::default_generator().uniform() == next_default);
  CHECK(other.uniform() == next_sampler);
  saved.train(3);
  fresh.train(3);
  CHECK(fresh.by_name() == saved.by_name());
  auto latest = pp::latest_named_checkpoint(dir.path, 3);
  REQUIRE(latest.has_value());
  CHECK(latest->step == 40);
}

TEST_CASE("a named checkpoint loads into another split: stage count and stages per process",
          "[checkpoint][named][reshard]") {
  TempDir dir;
  Job saved(1, {1, 2, 3});  // 4 stages
  saved.train(2);
  pp::save_named_checkpoint(dir.path, saved.stages, *saved.opt, 7);
  for (const std::vector<int>& cuts : std::vector<std::vector<int>>{{2}, {}, {1, 3}}) {
    Job fresh(9, cuts);
    CHECK(pp::load_named_checkpoint(dir.path, fresh.stages, *fresh.opt).step == 7);
    CHECK(fresh.by_name() == saved.by_name());
  }
  // Each process of a 2-stage layout loads only its own stage (and optimizer).
  Job fresh(9, {2});
  for (const auto& stage : fresh.stages) {
    tp::optim::AdamW opt(pp::parameters({stage}));
    CHECK(pp::load_named_checkpoint(dir.path, {stage}, opt).step == 7);
    for (const auto& [name, p] : stage->module().named_parameters())
      CHECK(p.to_vector() == saved.by_name().at(name));
  }
}

TEST_CASE("each writer saves its stages and a step is complete when its indexes cover all",
          "[checkpoint][named]") {
  TempDir dir;
  Job job(3, {2});
  job.train(4);
  tp::optim::AdamW opt0(pp::parameters({job.stages[0]})), opt1(pp::parameters({job.stages[1]}));
  pp::save_named_checkpoint(dir.path, {job.stages[0]}, opt0, 10);
  CHECK_FALSE(pp::latest_named_checkpoint(dir.path, 2).has_value());
  CHECK_THROWS_WITH(pp::load_named_checkpoint(dir.path, job.stages, *job.opt),
                    Catch::Contains("no complete checkpoint") && Catch::Contains("stage 1"));
  pp::save_named_checkpoint(dir.path, {job.stages[1]}, opt1, 10);
  CHECK(pp::latest_named_checkpoint(dir.path, 2)->step == 10);
  pp::save_named_checkpoint(dir.path, {job.stages[0]}, opt0, 20);  // stage 1 never finished
  Job one(5, {});
  CHECK(pp::load_named_checkpoint(dir.path, one.stages, *one.opt).step == 10);
  CHECK_THROWS_WITH(pp::load_named_checkpoint(dir.path, one.stages, *one.opt, 20),
                    Catch::Contains("incomplete") && Catch::Contains("stage 1"));
}

TEST_CASE("a tied weight is saved once and loads into every copy", "[checkpoint][named]") {
  TempDir dir;
  auto build = [](uint64_t seed, std::vector<std::string> cuts) {
    tp::manual_seed(seed);
    auto model = tp::nn::GPT(tp::nn::GPTConfig{
        .vocab_size = 16, .context_length = 8, .n_layer = 2, .n_head = 2, .width = 8});
    pp::PipelineOptions options;
    for (const auto& c : cuts) options.split_spec[c] = pp::SplitPoint::Beginning;
    auto pipe = pp::pipeline(model, {tp::zeros({2, 8})}, options);
    return pp::build_stages(pipe, {tp::cpu()});
  };
  auto saved = build(1, {"blocks.1"});
  REQUIRE(!saved.back()->tied_parameters().empty());
  tp::optim::AdamW opt(pp::parameters(saved));
  pp::save_named_checkpoint(dir.path, saved, opt, 3);
  const auto index =
      pp::parse_index(pp::checkpoint_io::read_whole(index_path(dir.path, 3)), "index");
  std::map<std::string, int> count;
  for (const auto& e : index.entries)
    if (e.kind == pp::EntryKind::Model) ++count[e.name];
  for (const auto& [name, stages] : saved.back()->tied_parameters()) CHECK(count[name] == 1);
  for (const auto& [name, n] : count) CHECK(n == 1);

  auto fresh = build(2, {"blocks.0", "blocks.1", "ln_f"});
  tp::optim::AdamW fresh_opt(pp::parameters(fresh));
  pp::load_named_checkpoint(dir.path, fresh, fresh_opt);
  std::map<std::string, std::vector<float>> want;
  for (const auto& stage : saved)
    for (const auto& [name, t] : stage->module().state_dict()) want[name] = t.to_vector();
  for (const auto& stage : fresh)
    for (const auto& [name, t] : stage->module().state_dict()) CHECK(t.to_vector() == want[name]);
}

TEST_CASE("a version-2 checkpoint loads through load_named_checkpoint", "[checkpoint][named]") {
  TempDir dir;
  Job saved(1, {2});
  saved.train(2);
  pp::save_checkpoint(dir.path, saved.stages, *saved.opt, 12);
  Job fresh(9, {2});
  const auto info = pp::load_named_checkpoint(dir.path, fresh.stages, *fresh.opt);
  CHECK(info.step == 12);
  CHECK(info.version == 2);
  CHECK(fresh.by_name() == saved.by_name());
  CHECK(pp::latest_named_checkpoint(dir.path, 2)->version == 2);
  // A newer layout-free step wins over it.
  pp::save_named_checkpoint(dir.path, saved.stages, *saved.opt, 13);
  CHECK(pp::load_named_checkpoint(dir.path, fresh.stages, *fresh.opt).version == 3);
}

TEST_CASE("misuse: a named checkpoint that does not fit is a clear error, nothing changed",
          "[checkpoint][named][misuse]") {
  TempDir dir;
  Job saved(1, {2});
  saved.train(2);
  pp::save_named_checkpoint(dir.path, saved.stages, *saved.opt, 5);

  SECTION("another model (more blocks than this one)") {
    Job other(9, {1}, 2);
    const auto before = other.by_name();
    CHECK_THROWS_WITH(pp::load_named_checkpoint(dir.path, other.stages, *other.opt),
                      Catch::Contains("layers.2.net.0.") && Catch::Contains("lacks"));
    CHECK(other.by_name() == before);
  }
  SECTION("another model (more blocks than the checkpoint)") {
    Job other(9, {2}, 6);
    const auto before = other.by_name();
    CHECK_THROWS_WITH(pp::load_named_checkpoint(dir.path, other.stages, *other.opt),
                      Catch::Contains("has no tensor 'layers.4.net.0.weight'"));
    CHECK(other.by_name() == before);
  }
  SECTION("another size: a shape differs") {
    Job other(9, {2}, 4, 6);
    const auto before = other.by_name();
    CHECK_THROWS_WITH(pp::load_named_checkpoint(dir.path, other.stages, *other.opt),
                      Catch::Contains("layers.0.net.0.weight") && Catch::Contains("[8, 8]") &&
                          Catch::Contains("[6, 6]"));
    CHECK(other.by_name() == before);
  }
  SECTION("a truncated index") {
    const std::string path = index_path(dir.path, 5);
    const std::string text = pp::checkpoint_io::read_whole(path);
    std::ofstream(path, std::ios::binary | std::ios::trunc) << text.substr(0, text.size() / 2);
    Job other(9, {2});
    const auto before = other.by_name();
    CHECK_THROWS_WITH(pp::load_named_checkpoint(dir.path, other.stages, *other.opt),
                      Catch::Contains(path) && Catch::Contains("truncated"));
    CHECK(other.by_name() == before);
  }
  SECTION("a damaged tensor, and a truncated data file") {
    const auto index =
        pp::parse_index(pp::checkpoint_io::read_whole(index_path(dir.path, 5)), "index");
    const std::string data = pp::checkpoint_io::step_folder(dir.path, 5) + "/" + index.data_file;
    const auto& victim = index.entries[1];
    {
      std::fstream f(data, std::ios::in | std::ios::out | std::ios::binary);
      f.seekp(static_cast<std::streamoff>(victim.offset + 1));
      f.put('\x7f');
    }
    Job other(9, {2});
    const auto before = other.by_name();
    CHECK_THROWS_WITH(pp::load_named_checkpoint(dir.path, other.stages, *other.opt),
                      Catch::Contains("'" + victim.name + "'") && Catch::Contains("corrupted"));
    fs::resize_file(data, index.data_bytes - 10);
    CHECK_THROWS_WITH(pp::load_named_checkpoint(dir.path, other.stages, *other.opt),
                      Catch::Contains(data) && Catch::Contains("truncated"));
    CHECK(other.by_name() == before);
  }
  SECTION("another optimizer") {
    Job other(9, {2});
    tp::optim::SGD sgd(pp::parameters(other.stages), tp::optim::SGDOptions{.lr = 0.1f});
    CHECK_THROWS_WITH(pp::load_named_checkpoint(dir.path, other.stages, sgd),
                      Catch::Contains("AdamW") && Catch::Contains("SGD"));
  }
}

TEST_CASE("SGD's momentum reshards by parameter name", "[checkpoint][named][reshard]") {
  TempDir dir;
  Job saved(1, {1, 3});
  tp::optim::SGD sgd(pp::parameters(saved.stages),
                     tp::optim::SGDOptions{.lr = 0.1f, .momentum = 0.9f});
  tp::Generator g(4);
  for (int s = 0; s < 2; ++s) {
    for (tp::Tensor p : sgd.parameters()) p.set_grad(tp::randn(p.shape(), {}, &g));
    sgd.step();
  }
  pp::save_named_checkpoint(dir.path, saved.stages, sgd, 2);
  auto momentum_by_name = [](const Job& job, const tp::optim::SGD& opt) {
    std::map<std::string, std::vector<float>> all;
    std::map<const tp::TensorImpl*, std::string> names;
    for (const auto& stage : job.stages)
      for (const auto& [name, p] : stage->module().named_parameters())
        names[p.impl_ptr().get()] = name;
    const auto state = opt.state_dict();
    for (size_t i = 0; i < opt.parameters().size(); ++i)
      if (const tp::Tensor* t = state.find("state." + std::to_string(i) + ".momentum_buffer"))
        all[names.at(opt.parameters()[i].impl_ptr().get())] = t->to_vector();
    return all;
  };
  Job fresh(9, {2});
  tp::optim::SGD fresh_sgd(pp::parameters(fresh.stages), tp::optim::SGDOptions{.lr = 0.5f});
  pp::load_named_checkpoint(dir.path, fresh.stages, fresh_sgd);
  const auto want = momentum_by_name(saved, sgd);
  CHECK(want.size() == 8);
  CHECK(momentum_by_name(fresh, fresh_sgd) == want);
  CHECK(fresh_sgd.options().momentum == 0.9f);
  CHECK(fresh_sgd.options().lr == 0.1f);
}

TEST_CASE("reshard: replicas split the reading and each ends with what a whole read gives",
          "[checkpoint][named][reshard][replicas]") {
  TempDir dir;
  Job saved(1, {1, 2, 3}, 4, 48);  // 4 stages
  saved.train(2);
  tp::Generator sampler(77);
  sampler.uniform();
  pp::save_named_checkpoint(dir.path, saved.stages, *saved.opt, 7,
                            {.generators = {{"data", &sampler}}});
  Job whole(9, {2}, 4, 48);
  tp::Generator whole_sampler(5);
  const auto whole_info = pp::load_named_checkpoint(
      dir.path, whole.stages, *whole.opt, std::nullopt, {.generators = {{"data", &whole_sampler}}});
  const double next_sample = whole_sampler.uniform();
  REQUIRE(bits_of(whole.by_name()) == bits_of(saved.by_name()));
  for (int n : {2, 3}) {
    std::vector<std::unique_ptr<Job>> jobs;
    std::vector<std::unique_ptr<tp::Generator>> samplers;
    for (int r = 0; r < n; ++r) {
      jobs.push_back(std::make_unique<Job>(20 + r, std::vector<int>{2}, 4, 48));
      samplers.push_back(std::make_unique<tp::Generator>(5));
    }
    std::vector<pp::NamedCheckpointInfo> infos(n);
    const auto errors = run_replicas(n, [&](std::shared_ptr<FakeReplicas> replicas) {
      const int r = replicas->rank();
      infos[r] = pp::load_named_checkpoint(
          dir.path, jobs[r]->stages, *jobs[r]->opt, std::nullopt,
          {.generators = {{"data", samplers[r].get()}}, .replicas = replicas});
    });
    uint64_t total = 0;
    for (int r = 0; r < n; ++r) {
      INFO(n << " replicas, replica " << r);
      CHECK(errors[r].empty());
      CHECK(infos[r].step == 7);
      CHECK(bits_of(jobs[r]->by_name()) == bits_of(whole.by_name()));
      CHECK(samplers[r]->uniform() == next_sample);
      // Its share (model and optimizer tensors balanced by bytes), not the whole.
      CHECK(infos[r].bytes_read < whole_info.bytes_read / n + whole_info.bytes_read / 10);
      total += infos[r].bytes_read;
    }
    CHECK(total >= whole_info.bytes_read);
  }
}

TEST_CASE("reshard: a damaged tensor one replica reads fails every replica alike, unchanged",
          "[checkpoint][named][reshard][replicas][misuse]") {
  TempDir dir;
  Job saved(1, {2});
  saved.train(2);
  pp::save_named_checkpoint(dir.path, saved.stages, *saved.opt, 5);
  const auto index =
      pp::parse_index(pp::checkpoint_io::read_whole(index_path(dir.path, 5)), "index");
  const std::string data = pp::checkpoint_io::step_folder(dir.path, 5) + "/" + index.data_file;
  std::set<std::string> finders;
  for (const auto& victim : index.entries) {
    if (victim.kind != pp::EntryKind::Model && victim.kind != pp::EntryKind::Optimizer) continue;
    const std::string text = pp::checkpoint_io::read_whole(data);
    test_files::flip_byte(data, static_cast<std::streamoff>(victim.offset));
    std::vector<std::unique_ptr<Job>> jobs;
    jobs.push_back(std::make_unique<Job>(9, std::vector<int>{2}));
    jobs.push_back(std::make_unique<Job>(9, std::vector<int>{2}));
    const auto before = jobs[0]->by_name();
    const auto errors = run_replicas(2, [&](std::shared_ptr<FakeReplicas> replicas) {
      pp::load_named_checkpoint(dir.path, jobs[replicas->rank()]->stages,
                                *jobs[replicas->rank()]->opt, std::nullopt, {.replicas = replicas});
    });
    INFO(victim.name << "." << victim.key << ": " << errors[0]);
    CHECK(errors[0] == errors[1]);
    CHECK_THAT(errors[0], Catch::Contains("'" + victim.name) && Catch::Contains("corrupted") &&
                              Catch::Contains("found by data-parallel replica"));
    for (const auto& job : jobs) CHECK(job->by_name() == before);
    for (const char* r : {"replica 0 of 2", "replica 1 of 2"})
      if (errors[0].find(r) != std::string::npos) finders.insert(r);
    std::ofstream(data, std::ios::binary | std::ios::trunc) << text;
  }
  CHECK(finders.size() == 2);  // errors found by either replica reached both
}

TEST_CASE("reshard: replicas that find different steps, or one that finds none, fail alike",
          "[checkpoint][named][reshard][replicas][misuse]") {
  TempDir dir, other;
  Job saved(1, {2});
  pp::save_named_checkpoint(dir.path, saved.stages, *saved.opt, 5);
  pp::save_named_checkpoint(dir.path, saved.stages, *saved.opt, 6);
  std::vector<std::unique_ptr<Job>> jobs;
  for (int r = 0; r < 2; ++r) jobs.push_back(std::make_unique<Job>(9, std::vector<int>{2}));
  const auto before = jobs[0]->by_name();
  auto load = [&](auto step_of, auto dir_of) {
    return run_replicas(2, [&](std::shared_ptr<FakeReplicas> replicas) {
      const int r = replicas->rank();
      pp::load_named_checkpoint(dir_of(r), jobs[r]->stages, *jobs[r]->opt, step_of(r),
                                {.replicas = replicas});
    });
  };
  auto errors =
      load([](int r) { return std::optional<int64_t>(5 + r); }, [&](int) { return dir.path; });
  CHECK(errors[0] == errors[1]);
  CHECK_THAT(errors[0], Catch::Contains("differ in the step they load") &&
                            Catch::Contains("step 5") && Catch::Contains("step 6"));
  fs::create_directories(other.path + "/step_00000009");
  std::ofstream(other.path + "/step_00000009/index_s0.txt") << "not an index\n";  // damaged
  errors =
      load([](int) { return std::nullopt; }, [&](int r) { return r == 0 ? dir.path : other.path; });
  CHECK(errors[0] == errors[1]);
  CHECK_THAT(errors[0], Catch::Contains("found by data-parallel replica 1 of 2"));
  for (const auto& job : jobs) CHECK(job->by_name() == before);
}

TEST_CASE("reshard: replicas that hold different stages refuse alike",
          "[checkpoint][named][reshard][replicas][misuse]") {
  TempDir dir;
  Job saved(1, {2});
  pp::save_named_checkpoint(dir.path, saved.stages, *saved.opt, 5);
  Job first(9, {2}), second(9, {2});
  tp::optim::AdamW second_opt(pp::parameters({second.stages[0]}));
  const auto errors = run_replicas(2, [&](std::shared_ptr<FakeReplicas> replicas) {
    if (replicas->rank() == 0)
      pp::load_named_checkpoint(dir.path, first.stages, *first.opt, std::nullopt,
                                {.replicas = replicas});
    else
      pp::load_named_checkpoint(dir.path, {second.stages[0]}, second_opt, std::nullopt,
                                {.replicas = replicas});
  });
  CHECK(errors[0] == errors[1]);
  CHECK_THAT(errors[0], Catch::Contains("replicas differ in what they load"));
}
