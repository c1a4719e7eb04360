// A data-parallel replica whose step fails tells the others at once, also when it fails its first
// step before another replica has finished setting up (with the ranks of one job in this process,
// join_job, one thread each).
#include <catch2/catch.hpp>
#include <chrono>
#include <thread>

#include "in_process_job.h"
#include "tensorplay/pipelining/build_stage.h"
#include "tensorplay/pipelining/pipeline.h"
#include "tensorplay/pipelining/runtime/detail/data_parallel_hook.h"
#include "tensorplay/pipelining/runtime/schedule.h"
#include "tensorplay/tensor.h"

namespace tp = tensorplay;
namespace dist = tensorplay::distributed;
namespace pp = tensorplay::pipelining;

namespace {

constexpr int64_t kWidth = 8;

// Replica 0 lingers after its setup with the other replica, as a slow process would.
void linger_on_replica_0(int dp_rank) {
  if (dp_rank == 0) std::this_thread::sleep_for(std::chrono::milliseconds(500));
}

struct HookReset {
  ~HookReset() { pp::detail::set_data_parallel_setup_hook(nullptr); }
};

}  // namespace

TEST_CASE("a replica failing its first step while another still sets up fails that one at once",
          "[data_parallel][multiprocess]") {
  pp::detail::set_data_parallel_setup_hook(&linger_on_replica_0);
  HookReset reset;
  std::vector<std::string> errors(2);
  std::vector<double> seconds(2);
  auto outcomes = tp::testing::run_ranks(2, {0, 1}, std::chrono::seconds(60), [&](auto& world) {
    const int rank = world.global_rank();
    tp::manual_seed(3);
    auto model = tp::nn::Sequential(tp::nn::Linear(kWidth, kWidth), tp::nn::Tanh());
    auto pipe = pp::pipeline(*model, {tp::zeros({2, kWidth})});
    const dist::DeviceMesh job = world;
    const dist::DeviceMesh mesh =
        dist::DeviceMesh("cpu", {1, 2}, {"pp", "dp"}, rank).with_job(job.job());
    pp::PipelineStage stage = pp::build_stage(pipe, 0, tp::cpu(), mesh);
    pp::ScheduleGPipe schedule(
        stage, 2, tp::nn::mse_loss,
        {.step_timeout = std::chrono::seconds(40), .transfer_timeout = std::chrono::seconds(30)});
    // Replica 1's target has the wrong width: its loss fails before any gradient exists.
    tp::Tensor x = tp::randn({4, kWidth}), y = tp::randn({4, rank == 1 ? kWidth + 1 : kWidth});
    const auto t0 = std::chrono::steady_clock::now();
    try {
      schedule.step({x}, {.target = y});
    } catch (const std::exception& e) {
      errors[rank] = e.what();
    }
    seconds[rank] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  });
  for (const auto& o : outcomes) CHECK(o.error.empty());
  CHECK_THAT(errors[1], Catch::Contains("mse_loss"));
  INFO("replica 0 failed after " << seconds[0] << " s: " << errors[0]);
  CHECK_THAT(errors[0], Catch::Contains("rank 1 (a replica) failed step 1"));
  CHECK(seconds[0] < 10);  // not the 30 s transfer timeout
}
