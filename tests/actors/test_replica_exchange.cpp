// Tests for replica_exchange.h and ProcessGroup::all_gather_tensors, with the ranks of one job in
// this process (join_job, one thread each): a pp 2 x dp 2 load of a checkpoint written by pp 4
// equals a whole read bit for bit, each replica reading its share; a damaged tensor one replica
// reads fails both replicas of its stage alike, nothing changed, nothing hung.
#include <catch2/catch.hpp>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <stdexcept>

#include "in_process_job.h"
#include "tensorplay/pipelining/build_stage.h"
#include "tensorplay/pipelining/checkpoints/checkpoint_index.h"
#include "tensorplay/pipelining/checkpoints/checkpoint_io.h"
#include "tensorplay/pipelining/checkpoints/named_checkpoint.h"
#include "tensorplay/pipelining/pipeline.h"
#include "tensorplay/pipelining/runtime/group_replica_exchange.h"
#include "tensorplay/tensor.h"
#include "tensors/temp_path.h"

namespace tp = tensorplay;
namespace dist = tensorplay::distributed;
namespace pp = tensorplay::pipelining;
namespace fs = std::filesystem;

namespace {

using test_files::TempDir;

using Stages = std::vector<std::shared_ptr<pp::PipelineStage>>;
using Bits = std::map<std::string, std::vector<uint32_t>>;
constexpr int64_t kLayers = 4;

std::vector<uint32_t> bits(const tp::Tensor& t) {
  std::vector<uint32_t> out(t.numel());
  if (t.numel() > 0) std::memcpy(out.data(), t.raw_data(), t.nbytes());
  return out;
}

// A small GPT (tied embedding and head) of seed `seed`, split into `n` stages at blocks.
Stages gpt_stages(uint64_t seed, int n) {
  tp::manual_seed(seed);
  auto model = tp::nn::GPT(tp::nn::GPTConfig{
      .vocab_size = 32, .context_length = 8, .n_layer = kLayers, .n_head = 2, .width = 16});
  pp::PipelineOptions options;
  for (int s = 1; s < n; ++s)
    options.split_spec["blocks." + std::to_string(s * kLayers / n)] = pp::SplitPoint::Beginning;
  return pp::build_stages(pp::pipeline(model, {tp::zeros({1, 8})}, options), {tp::cpu()});
}

// Parameters and AdamW moments of `stages` by name ("name#key" for the moments).
Bits state_bits(const Stages& stages, const tp::optim::AdamW& opt) {
  Bits all;
  std::map<const tp::TensorImpl*, std::string> names;
  for (const auto& stage : stages)
    for (const auto& [name, p] : stage->module().named_parameters()) {
      all[name] = bits(p);
      names[p.impl_ptr().get()] = name;
    }
  const auto state = opt.state_dict();
  for (size_t i = 0; i < opt.parameters().size(); ++i)
    for (const char* key : {"exp_avg", "exp_avg_sq", "step"})
      if (const tp::Tensor* t = state.find("state." + std::to_string(i) + "." + key))
        all[names.at(opt.parameters()[i].impl_ptr().get()) + "#" + key] = bits(*t);
  return all;
}

// Step 3 of a GPT split in 4 stages, one writer each (as pp 4 writes), with AdamW moments and a
// "data" generator; returns the generator's next draw after the save.
double write_pp4(const std::string& dir) {
  tp::Generator data(77), grads(3);
  data.uniform();
  for (const auto& stage : gpt_stages(1, 4)) {
    tp::optim::AdamW opt(pp::parameters({stage}));
    for (tp::Tensor p : opt.parameters()) p.set_grad(tp::randn(p.shape(), {}, &grads));
    opt.step();
    tp::Generator copy(77);
    copy.uniform();
    pp::save_named_checkpoint(dir, {stage}, opt, 3,
                              {.generators = {{"data", &copy}}, .layout = "pp 4 x dp 1"});
  }
  return data.uniform();
}

// One rank of a pp 2 x dp 2 job: its stage (pp index rank / 2), optimizer and data generator.
struct Rank {
  explicit Rank(int rank) : stages{gpt_stages(20 + rank, 2).at(rank / 2)} {
    opt = std::make_unique<tp::optim::AdamW>(pp::parameters(stages));
  }
  Stages stages;
  std::unique_ptr<tp::optim::AdamW> opt;
  std::unique_ptr<tp::Generator> data = std::make_unique<tp::Generator>(5);
  pp::NamedCheckpointInfo info;
};

// Loads `dir` into the four ranks of a pp 2 x dp 2 job joined in this process; each rank's
// error ("" when it loaded).
std::vector<std::string> load_pp2_dp2(const std::string& dir, std::vector<Rank>& ranks) {
  auto outcomes =
      tp::testing::run_ranks(4, {0, 1, 2, 3}, std::chrono::seconds(20), [&](auto& world) {
        Rank& me = ranks[world.global_rank()];
        const dist::DeviceMesh job = world;
        const dist::DeviceMesh mesh =
            dist::DeviceMesh("cpu", {2, 2}, {"pp", "dp"}, world.global_rank()).with_job(job.job());
        me.stages.front()->set_mesh(mesh);
        auto replicas = pp::replica_exchange(me.stages);
        // No Catch2 assertion on a rank's thread: an error, which the caller checks.
        if (replicas == nullptr)
          throw std::runtime_error("rank " + std::to_string(world.global_rank()) +
                                   " got no replica exchange");
        me.info = pp::load_named_checkpoint(
            dir, me.stages, *me.opt, std::nullopt,
            {.generators = {{"data", me.data.get()}}, .replicas = replicas});
      });
  std::vector<std::string> errors;
  for (const auto& o : outcomes) errors.push_back(o.error);
  return errors;
}

}  // namespace

TEST_CASE("reshard: all_gather_tensors gives every member every member's tensors bit for bit",
          "[replicas][reshard][process_group]") {
  auto sent = [](int r) {
    std::vector<tp::Tensor> out;
    tp::Generator g(10 + r);
    for (int i = 0; i < r; ++i) out.push_back(tp::randn({2 + i, 3}, {}, &g));  // rank 0: none
    return out;
  };
  std::vector<std::vector<std::vector<tp::Tensor>>> got(3);
  auto outcomes = tp::testing::run_ranks(3, {0, 1, 2}, std::chrono::seconds(20), [&](auto& world) {
    const int r = world.global_rank();
    got[r] = world.all_gather_tensors(sent(r));
    got[r] = world.all_gather_tensors(sent(r));  // twice: calls do not mix
  });
  for (int me = 0; me < 3; ++me) {
    CHECK(outcomes[me].error.empty());
    REQUIRE(got[me].size() == 3);
    for (int r = 0; r < 3; ++r) {
      REQUIRE(got[me][r].size() == sent(r).size());
      for (size_t i = 0; i < got[me][r].size(); ++i) CHECK(bits(got[me][r][i]) == bits(sent(r)[i]));
    }
  }
}

TEST_CASE(
    "reshard: pp 2 x dp 2 loads a pp 4 checkpoint as a whole read does, each replica "
    "reading its share",
    "[replicas][reshard][checkpoint]") {
  TempDir dir;
  const double next_draw = write_pp4(dir.path);
  const Stages whole = gpt_stages(9, 2);
  tp::optim::AdamW whole_opt(pp::parameters(whole));
  tp::Generator whole_data(5);
  const auto whole_info = pp::load_named_checkpoint(dir.path, whole, whole_opt, std::nullopt,
                                                    {.generators = {{"data", &whole_data}}});
  const Bits want = state_bits(whole, whole_opt);
  REQUIRE(whole_data.uniform() == next_draw);

  std::vector<Rank> ranks;
  for (int r = 0; r < 4; ++r) ranks.emplace_back(r);
  const auto errors = load_pp2_dp2(dir.path, ranks);
  for (int r = 0; r < 4; ++r) {
    INFO("rank " << r << ": " << errors[r]);
    REQUIRE(errors[r].empty());
    CHECK(ranks[r].info.step == 3);
    CHECK(ranks[r].data->uniform() == next_draw);
    const Bits got = state_bits(ranks[r].stages, *ranks[r].opt);
    CHECK(got.size() > 10);
    for (const auto& [name, value] : got) {
      INFO(name);
      REQUIRE(want.count(name));
      CHECK(value == want.at(name));
    }
    // A quarter of the model and its moments, give or take: not its stage's half.
    CHECK(ranks[r].info.bytes_read < whole_info.bytes_read * 4 / 10);
  }
}

TEST_CASE("reshard: a damaged tensor one dp replica reads fails both replicas alike, unchanged",
          "[replicas][reshard][checkpoint][misuse]") {
  TempDir dir;
  write_pp4(dir.path);
  // The largest tensors of pp 4's stages 0 and 1, which pp 2's stage 0 (ranks 0 and 1) holds.
  std::vector<std::pair<std::string, pp::IndexEntry>> victims;
  for (int s : {0, 1}) {
    const std::string folder = pp::checkpoint_io::step_folder(dir.path, 3);
    const auto index = pp::parse_index(
        pp::checkpoint_io::read_whole(folder + "/index_s" + std::to_string(s) + ".txt"), "index");
    for (const auto& e : index.entries)
      if (e.kind == pp::EntryKind::Model) victims.emplace_back(folder + "/" + index.data_file, e);
  }
  std::sort(victims.begin(), victims.end(),
            [](const auto& a, const auto& b) { return a.second.bytes > b.second.bytes; });
  victims.resize(3);
  std::set<std::string> finders;
  for (const auto& [data, victim] : victims) {
    const std::string text = pp::checkpoint_io::read_whole(data);
    test_files::flip_byte(data, static_cast<std::streamoff>(victim.offset + 2));
    std::vector<Rank> ranks;
    for (int r = 0; r < 4; ++r) ranks.emplace_back(r);
    const Bits before = state_bits(ranks[0].stages, *ranks[0].opt);
    const Bits before_1 = state_bits(ranks[1].stages, *ranks[1].opt);
    const auto errors = load_pp2_dp2(dir.path, ranks);
    INFO(victim.name << ": " << errors[0]);
    CHECK(errors[0] == errors[1]);
    CHECK_THAT(errors[0], Catch::Contains("'" + victim.name + "'") &&
                              Catch::Contains("corrupted") &&
                              Catch::Contains("found by data-parallel replica"));
    CHECK(errors[2].empty());  // stage 1's replicas need none of it
    CHECK(state_bits(ranks[0].stages, *ranks[0].opt) == before);
    CHECK(state_bits(ranks[1].stages, *ranks[1].opt) == before_1);
    for (const char* r : {"replica 0 of 2", "replica 1 of 2"})
      if (errors[0].find(r) != std::string::npos) finders.insert(r);
    std::ofstream(data, std::ios::binary | std::ios::trunc) << text;
  }
  CHECK(finders.size() == 2);  // what either replica found reached the other
}

TEST_CASE("reshard: a replica that never loads makes its peer fail within the group's timeout",
          "[replicas][reshard][checkpoint][misuse]") {
  TempDir dir;
  write_pp4(dir.path);
  const Stages stages = gpt_stages(9, 2);
  tp::optim::AdamW opt(pp::parameters(stages));
  const Bits before = state_bits(stages, opt);
  const auto t0 = std::chrono::steady_clock::now();
  // pp 1 x dp 2: rank 0 loads the whole model, its replica (rank 1) joins and does nothing.
  auto outcomes = tp::testing::run_ranks(2, {0, 1}, std::chrono::seconds(3), [&](auto& world) {
    if (world.global_rank() == 1) return;
    const dist::DeviceMesh job = world;
    const dist::DeviceMesh mesh =
        dist::DeviceMesh("cpu", {1, 2}, {"pp", "dp"}, 0).with_job(job.job());
    for (const auto& stage : stages) stage->set_mesh(mesh);
    pp::load_named_checkpoint(dir.path, stages, opt, std::nullopt,
                              {.replicas = pp::replica_exchange(stages)});
  });
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  CHECK_THAT(outcomes[0].error,
             Catch::Contains("timed out") && Catch::Contains("[1] did not take part"));
  CHECK(outcomes[1].error.empty());
  CHECK(seconds < 30);
  CHECK(state_bits(stages, opt) == before);
}
