// Tests for process_group.h in one process: a group of one without launcher variables, new_group
// checks, clear errors before init, and jobs of several ranks joined in this process (join_job),
// their collectives and subgroups. Collectives across processes run in tests/multiprocess.
#include <array>
#include <atomic>
#include <catch2/catch.hpp>
#include <map>
#include <set>
#include <stdexcept>

#include "in_process_job.h"
#include "tensorplay/distributed/detail/group_runtime.h"
#include "tensorplay/distributed/process_group.h"
#include "tensorplay/pipelining/pipeline.h"
#include "tensorplay/pipelining/runtime/schedule.h"
#include "tensorplay/tensor.h"
#include "tensorplay/transport/collective_key.h"

namespace tp = tensorplay;
namespace dist = tensorplay::distributed;
namespace pp = tensorplay::pipelining;

namespace {

struct TwoLayerImpl : tp::nn::Module {
  TwoLayerImpl() {
    a = register_module("a", tp::nn::Linear(4, 4));
    b = register_module("b", tp::nn::Linear(4, 4));
  }
  tp::Tensor forward(const tp::Tensor& x) override { return b(tp::relu(a(x))); }
  tp::nn::Linear a{nullptr}, b{nullptr};
};
TENSORPLAY_MODULE(TwoLayer);

pp::Pipe split_two_layer(TwoLayer& model) {
  return pp::pipeline(model, {tp::zeros({2, 4})},
                      {.split_spec = {{"b", pp::SplitPoint::Beginning}}});
}

}  // namespace

TEST_CASE("a process group of one, and back", "[process_group]") {
  dist::destroy_process_group();  // another case may have left one
  CHECK_FALSE(dist::is_initialized());
  CHECK(dist::get_rank() == 0);
  CHECK(dist::get_world_size() == 1);
  CHECK(dist::get_backend() == "none");

  dist::init_process_group({.backend = "ucx", .env = dist::LaunchEnv{}});
  CHECK(dist::is_initialized());
  CHECK(dist::get_backend() == "ucx");
  CHECK(dist::world_group().ranks() == std::vector<int>{0});
  CHECK(dist::world_group().rank() == 0);
  CHECK_THROWS_WITH(dist::init_process_group({.env = dist::LaunchEnv{}}),
                    Catch::Contains("already initialized"));

  tp::Tensor t = tp::ones({3});
  dist::all_reduce(t);  // a group of one: unchanged
  CHECK(t.to_vector() == std::vector<float>{1, 1, 1});
  dist::barrier();
  CHECK(dist::world_group().all_gather_bytes("x") == std::vector<std::string>{"x"});
  dist::destroy_process_group();
  CHECK_FALSE(dist::is_initialized());
}

TEST_CASE("new_group checks its ranks", "[process_group]") {
  CHECK(dist::new_group({0}).ranks() == std::vector<int>{0});
  CHECK_THROWS_WITH(dist::new_group({}), Catch::Contains("no ranks"));
  CHECK_THROWS_WITH(dist::new_group({0, 0}), Catch::Contains("listed twice"));
  CHECK_THROWS_WITH(dist::new_group({1}), Catch::Contains("[0, 1)"));
  CHECK(dist::new_group({0}).contains(0));
  CHECK_FALSE(dist::new_group({0}).contains(1));
}

TEST_CASE("bad init options are clear errors", "[process_group]") {
  dist::destroy_process_group();
  CHECK_THROWS_WITH(dist::init_process_group({.backend = "mpi", .env = dist::LaunchEnv{}}),
                    Catch::Contains("backend 'mpi'"));
  CHECK_THROWS_WITH(
      dist::init_process_group({.timeout = std::chrono::milliseconds(0), .env = dist::LaunchEnv{}}),
      Catch::Contains("timeout must be positive"));
  CHECK_FALSE(dist::is_initialized());
}

TEST_CASE("a rank that cannot reach rank 0 fails within its timeout, naming the address",
          "[process_group]") {
  dist::destroy_process_group();
  dist::LaunchEnv env;
  env.launched = true;
  env.source = "torchrun";
  env.rank = 1;
  env.world_size = 2;
  env.master_addr = "127.0.0.1";
  env.master_port = 9;  // discard: nothing listens there
  auto t0 = std::chrono::steady_clock::now();
  CHECK_THROWS_WITH(
      dist::init_process_group({.timeout = std::chrono::milliseconds(300), .env = env}),
      Catch::Contains("could not reach rank 0 at 127.0.0.1:9"));
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5));
  CHECK_FALSE(dist::is_initialized());
}

using tp::testing::free_port;

TEST_CASE("rank 0 alone names the ranks that did not join within its timeout, and frees its port",
          "[process_group]") {
  dist::destroy_process_group();
  dist::LaunchEnv env;
  env.launched = true;
  env.source = "torchrun";
  env.rank = 0;
  env.world_size = 3;
  env.master_addr = "127.0.0.1";
  env.master_port = free_port();
  env.rdzv_timeout =
      std::chrono::milliseconds(200);  // TENSORPLAY_RDZV_TIMEOUT, when .timeout is unset
  for (int attempt = 0; attempt < 2; ++attempt) {  // the second binds the same port again
    auto t0 = std::chrono::steady_clock::now();
    CHECK_THROWS_WITH(dist::init_process_group({.backend = "ucx", .env = env}),
                      Catch::Contains("within rank 0's timeout of 200 ms") &&
                          Catch::Contains("rank(s) [1, 2] of 3 did not join (joined: [0])"));
    CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(2));
    CHECK_FALSE(dist::is_initialized());
  }
  // An explicit .timeout wins over TENSORPLAY_RDZV_TIMEOUT.
  CHECK_THROWS_WITH(dist::init_process_group(
                        {.backend = "ucx", .timeout = std::chrono::milliseconds(300), .env = env}),
                    Catch::Contains("within rank 0's timeout of 300 ms"));
}

TEST_CASE("local devices are the CPU without a GPU", "[process_group]") {
  if (tp::cuda_available()) return;
  CHECK(dist::local_devices() == std::vector<tp::Device>{tp::cpu()});
}

TEST_CASE("groups of one process get ids of their own, agreed by their members",
          "[process_group][join_job]") {
  dist::destroy_process_group();
  // A pp 2 x dp 2 job's groups, and the world: [0, 1] and [1, 3] once shared the bits a key
  // keeps, and a pipeline-group all-reduce landed in the data-parallel group's receive.
  const std::vector<std::vector<int>> groups = {{0, 1}, {2, 3}, {1, 3}, {0, 2}, {0, 1, 2, 3}};
  std::vector<std::map<std::vector<int>, uint32_t>> streams(4);
  std::vector<std::vector<uint32_t>> schedules(4);
  auto outcomes = tp::testing::run_ranks(4, {0, 1, 2, 3}, std::chrono::seconds(20), [&](auto& w) {
    const int me = w.rank();
    auto& runtime = *dist::detail::shared_runtime_of(static_cast<dist::DeviceMesh>(w));
    for (const auto& g : groups)
      if (std::find(g.begin(), g.end(), me) != g.end())
        streams[me][g] = runtime.collective_stream(g);
    for (int i = 0; i < 17; ++i) schedules[me].push_back(runtime.next_stream({0, 1, 2, 3}));
    w.barrier();
  });
  for (const auto& o : outcomes) REQUIRE(o.error == "");
  for (int r = 0; r < 4; ++r) {
    std::set<uint32_t> ids;
    for (const auto& [g, stream] : streams[r]) {
      CHECK(stream % (1u << tp::transport::kStreamBits) == 0);  // the collectives' slot
      ids.insert(stream >> tp::transport::kStreamBits);
      for (int other : g) CHECK(streams[other].at(g) == stream);  // every member agrees
    }
    CHECK(ids.size() == streams[r].size());  // no two groups of a process share an id
    CHECK(schedules[r] == schedules[0]);
    // Slots 1 to 15 above the world's id, then the first slot again.
    CHECK(schedules[r][0] % 16 == 1);
    CHECK(schedules[r][14] % 16 == 15);
    CHECK(schedules[r][15] == schedules[r][0]);
    CHECK(schedules[r][0] >> 4 == streams[r].at({0, 1, 2, 3}) >> 4);
  }
}

TEST_CASE("ranks of one job joined in one process run collectives without a launcher",
          "[process_group][join_job]") {
  dist::destroy_process_group();
  // What each rank saw, recorded on its thread and checked on this one (Catch2's assertions are
  // not thread-safe).
  struct Seen {
    int rank = -1, global_rank = -1, ends_rank = 0;
    std::vector<int> ranks, ends_ranks;
    std::vector<std::string> gathered;
    std::vector<float> reduced, ends_reduced;
    std::string outside_error = "(not tried)", bad_group_error = "(not tried)";
  };
  std::vector<Seen> seen(3);
  std::array<std::atomic<bool>, 3> taken{};  // each rank's slot is written by one thread only
  auto outcomes = tp::testing::run_ranks(3, {0, 1, 2}, std::chrono::seconds(20), [&](auto& world) {
    const int g = world.global_rank();
    if (g < 0 || g >= 3 || taken[g].exchange(true))
      throw std::runtime_error("global rank " + std::to_string(g) + " twice or out of range");
    Seen& s = seen[g];
    const int me = s.rank = world.rank();
    s.global_rank = world.global_rank();
    s.ranks = world.ranks();
    world.barrier();
    s.gathered = world.all_gather_bytes(std::to_string(me));
    tp::Tensor t = tp::full({4}, static_cast<float>(me + 1));
    world.all_reduce(t);
    s.reduced = t.to_vector();
    // A subgroup of the same job, and a rank outside it.
    dist::ProcessGroup ends = world.new_group({2, 0});
    s.ends_ranks = ends.ranks();
    s.ends_rank = ends.rank();
    if (me == 1) {
      s.outside_error = tp::testing::error_of([&] { ends.barrier(); });
    } else {
      tp::Tensor u = tp::full({2}, static_cast<float>(10 * me + 1));
      ends.all_reduce(u);
      s.ends_reduced = u.to_vector();
    }
    s.bad_group_error = tp::testing::error_of([&] { world.new_group({3}); });
    world.barrier();
  });
  for (int me = 0; me < 3; ++me) {
    INFO("rank " << me);
    const Seen& s = seen[me];
    CHECK(outcomes[me].error == "");
    CHECK(s.rank == me);
    CHECK(s.global_rank == me);
    CHECK(s.ranks == std::vector<int>{0, 1, 2});
    CHECK(s.gathered == std::vector<std::string>{"0", "1", "2"});
    CHECK(s.reduced == std::vector<float>(4, 6.0f));
    CHECK(s.ends_ranks == std::vector<int>{0, 2});
    if (me == 1) {
      CHECK(s.ends_rank == -1);
      CHECK_THAT(s.outside_error, Catch::Contains("rank 1 is not a member of the group"));
    } else {
      CHECK(s.ends_reduced == std::vector<float>{22, 22});
    }
    CHECK_THAT(s.bad_group_error, Catch::Contains("[0, 3)"));
  }
  CHECK_FALSE(dist::is_initialized());  // the process's default group is left alone
}

TEST_CASE(
    "a rank in the default group and one joined apart meet, and a group of a left job says so",
    "[process_group][join_job]") {
  dist::destroy_process_group();
  const int port = free_port();
  std::string joined_error;
  std::thread other([&] {
    try {
      auto world = dist::join_job(
          {.timeout = std::chrono::seconds(20), .env = tp::testing::loopback_env(1, 2, port)});
      tp::Tensor t = tp::ones({3});
      world.all_reduce(t);
      world.barrier();
    } catch (const std::exception& e) {
      joined_error = e.what();
    }
  });
  dist::init_process_group(
      {.timeout = std::chrono::seconds(20), .env = tp::testing::loopback_env(0, 2, port)});
  dist::ProcessGroup world = dist::world_group();
  tp::Tensor t = tp::full({3}, 2.0f);
  dist::all_reduce(t);
  CHECK(t.to_vector() == std::vector<float>{3, 3, 3});
  world.barrier();
  other.join();
  CHECK(joined_error == "");
  dist::destroy_process_group();
  CHECK_THROWS_WITH(world.barrier(), Catch::Contains("the group's job was left"));
}

TEST_CASE("a schedule across two ranks joined in one process trains as the embedded one",
          "[process_group][join_job]") {
  dist::destroy_process_group();
  tp::manual_seed(5);
  TwoLayer reference_model;
  std::vector<TwoLayer> models(2);
  for (auto& m : models) m->load_state_dict(reference_model->state_dict());
  auto reference_pipe = split_two_layer(reference_model);
  auto reference = pp::build_stages(reference_pipe, {tp::cpu()});
  pp::Schedule1F1B embedded(reference, 4, tp::nn::mse_loss);
  tp::Tensor x = tp::randn({8, 4}), y = tp::randn({8, 4});
  std::vector<tp::Tensor> reference_losses;
  embedded.step({x}, {.target = y, .losses = &reference_losses});

  std::vector<std::vector<tp::Tensor>> losses(2);
  std::vector<std::map<std::string, std::vector<float>>> grads(2);
  auto outcomes = tp::testing::run_ranks(2, {0, 1}, std::chrono::seconds(20), [&](auto& world) {
    const int r = world.rank();
    pp::Pipe pipe = split_two_layer(models[r]);
    pp::PipelineStage stage = pp::build_stage(pipe, r, tp::cpu(), world);
    pp::Schedule1F1B schedule(stage, 4, tp::nn::mse_loss);
    schedule.step(r == 0 ? std::vector<tp::Tensor>{x} : std::vector<tp::Tensor>{},
                  {.target = y, .losses = &losses[r]});
    for (const auto& [name, p] : stage.module().named_parameters())
      grads[r][name] = p.grad().to_vector();
    world.barrier();
  });
  for (const auto& o : outcomes) CHECK(o.error == "");
  REQUIRE(losses[1].size() == reference_losses.size());
  for (size_t mb = 0; mb < losses[1].size(); ++mb)
    CHECK(losses[1][mb].item() == reference_losses[mb].item());
  for (int r = 0; r < 2; ++r) {
    REQUIRE_FALSE(grads[r].empty());
    for (const auto& [name, g] : grads[r])
      CHECK(g == reference[r]->module().find_tensor(name).grad().to_vector());
  }
  CHECK_FALSE(dist::is_initialized());
}
