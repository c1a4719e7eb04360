// Tests that the embedded runtime hands a stage's outputs to the next stage without copying them:
// between two ranks (the local channel) and between two stages of one rank (the V schedules'
// turn), every microbatch's input of stage s+1 is the memory stage s produced, counted over a
// whole step.
#include <catch2/catch.hpp>
#include <map>
#include <mutex>

#include "tensorplay/pipelining/runtime/schedule.h"
#include "tensorplay/tensor.h"

namespace tp = tensorplay;
namespace pp = tensorplay::pipelining;
namespace sc = tensorplay::schedules;

namespace {

/// Where each microbatch's input and output of every stage lived, as the modules saw them.
struct Addresses {
  std::mutex mutex;
  std::map<std::pair<int, int64_t>, const void*> inputs;   // (stage, first value) -> address
  std::map<std::pair<int, int64_t>, const void*> outputs;  // (stage, first value) -> address
};

/// Adds 1 and records the addresses of its input and output, keyed by the input's first value
/// (each microbatch starts at a distinct value, so keys tell microbatches apart).
class Recording : public tp::nn::Module {
 public:
  Recording(int stage, Addresses* addresses) : stage_(stage), addresses_(addresses) {
    scale_ = register_parameter("scale", tp::ones({1}));
  }
  tp::Tensor forward(const tp::Tensor& x) override {
    tp::Tensor out = x * scale_ + 1.0f;
    std::lock_guard lock(addresses_->mutex);
    const auto key = static_cast<int64_t>(x.to_vector()[0]);
    addresses_->inputs[{stage_, key}] = x.raw_data();
    addresses_->outputs[{stage_, key}] = out.raw_data();
    return out;
  }

 private:
  int stage_;
  Addresses* addresses_;
  tp::Tensor scale_;
};

void check_no_copies(sc::ScheduleKind kind) {
  const int num_stages = 4, n = 4;
  Addresses addresses;
  std::vector<std::shared_ptr<pp::PipelineStage>> stages;
  for (int s = 0; s < num_stages; ++s)
    stages.push_back(std::make_shared<pp::PipelineStage>(
        std::make_shared<Recording>(s, &addresses), s, num_stages, tp::cpu(),
        std::vector<tp::Tensor>{tp::zeros({1, 1024})}));
  addresses.inputs.clear();
  addresses.outputs.clear();
  pp::PipelineSchedule schedule(stages, n, tp::nn::mse_loss, kind);
  // Microbatch mb starts at 100 * mb: stage s sees 100 * mb + s first.
  tp::Tensor x = tp::zeros({n, 1024});
  for (int mb = 0; mb < n; ++mb) x.slice0(mb, mb + 1).fill_(100.0f * mb);
  schedule.step({x}, {.target = tp::zeros({n, 1024})});

  int handed = 0, copied = 0;
  for (int s = 0; s + 1 < num_stages; ++s)
    for (int mb = 0; mb < n; ++mb) {
      auto sent = addresses.outputs.find({s, 100 * mb + s});
      auto got = addresses.inputs.find({s + 1, 100 * mb + s + 1});
      REQUIRE(sent != addresses.outputs.end());
      REQUIRE(got != addresses.inputs.end());
      ++handed;
      if (sent->second != got->second) ++copied;
    }
  CHECK(handed == (num_stages - 1) * n);
  CHECK(copied == 0);
}

}  // namespace

TEST_CASE("the in-process hand-off between stages copies no tensor bytes", "[schedule][copies]") {
  // 1F1B: every boundary crosses ranks; ZBV: the middle boundary is a turn inside rank 1.
  for (auto kind : {sc::ScheduleKind::OneFOneB, sc::ScheduleKind::ZBVZeroBubble}) {
    DYNAMIC_SECTION(sc::schedule_name(kind)) { check_no_copies(kind); }
  }
}
