// Tests for orders and policies given from outside (ScheduleOptions::order and ::policy,
// register_custom_function in schedule.h): a CSV written by tp-sim and an edited one train like
// the unsplit model on stage actors; an invalid CSV is rejected before any step with the
// validator's table; the dynamic policy keeps its activation cap (read from the message log); a
// user's policy object and a custom OVERLAP_F_B function run the step.
#include <atomic>
#include <catch2/catch.hpp>
#include <cmath>
#include <sstream>

#include "log_capture.h"
#include "tensorplay/observe/trace_log.h"
#include "tensorplay/pipelining/runtime/schedule.h"
#include "tensorplay/schedules/csv.h"
#include "tensorplay/schedules/errors.h"
#include "tensorplay/tensor.h"

namespace tp = tensorplay;
namespace pp = tensorplay::pipelining;
namespace sc = tensorplay::schedules;

namespace {

constexpr int64_t kDim = 8;

std::string data_file(const std::string& name) {
  return std::string(TP_ACTORS_TEST_DATA) + "/" + name;
}

/// `num_stages` blocks chained (the reference) and a stage per block holding a copy.
struct Chain {
  std::vector<std::shared_ptr<tp::nn::Module>> reference;
  std::vector<std::shared_ptr<pp::PipelineStage>> stages;

  explicit Chain(int num_stages) {
    tp::manual_seed(31);
    for (int i = 0; i < num_stages; ++i) {
      auto block = tp::nn::Sequential(tp::nn::Linear(kDim, kDim), tp::nn::Tanh()).ptr();
      auto copy = tp::nn::Sequential(tp::nn::Linear(kDim, kDim), tp::nn::Tanh()).ptr();
      for (auto& [name, p] : block->named_parameters()) copy->find_tensor(name).copy_(p);
      reference.push_back(block);
      stages.push_back(std::make_shared<pp::PipelineStage>(
          copy, i, num_stages, tp::cpu(), std::vector<tp::Tensor>{tp::zeros({2, kDim})}));
    }
  }

  /// Runs `step` on the schedule and the reference on the same microbatches; checks losses and
  /// gradients.
  void check_step(pp::PipelineSchedule& schedule, int n) {
    tp::Tensor x = tp::randn({2 * n, kDim}), y = tp::randn({2 * n, kDim});
    std::vector<tp::Tensor> losses;
    schedule.step({x}, {.target = y, .losses = &losses});
    REQUIRE(losses.size() == static_cast<size_t>(n));
    for (int mb = 0; mb < n; ++mb) {
      tp::Tensor h = x.slice0(2 * mb, 2 * mb + 2);
      for (auto& m : reference) h = (*m)(h);
      tp::Tensor loss = tp::nn::mse_loss(h, y.slice0(2 * mb, 2 * mb + 2));
      CHECK(losses[mb].item() == Approx(loss.item()).epsilon(1e-5));
      (loss * (1.0f / n)).backward();
    }
    for (size_t s = 0; s < stages.size(); ++s) {
      auto got = stages[s]->module().parameters();
      auto want = reference[s]->parameters();
      REQUIRE(got.size() == want.size());
      for (size_t i = 0; i < got.size(); ++i) {
        INFO("stage " << s << " parameter " << i);
        auto g = got[i].grad().to_vector(), w = want[i].grad().to_vector();
        REQUIRE(g.size() == w.size());
        for (size_t k = 0; k < g.size(); ++k)
          CHECK(g[k] == Approx(w[k]).margin(1e-6).epsilon(1e-5));
      }
    }
    for (auto& s : stages) s->module().zero_grad();
    for (auto& m : reference) m->zero_grad();
  }
};

/// Counts the calls it delegates to the static order policy of its rank.
class CountingPolicy : public sc::SchedulePolicy {
 public:
  CountingPolicy(std::unique_ptr<sc::SchedulePolicy> inner, std::atomic<int>* handed_out)
      : inner_(std::move(inner)), handed_out_(handed_out) {}
  std::optional<sc::Action> next(const sc::ReadySet& ready) override {
    auto action = inner_->next(ready);
    if (action) handed_out_->fetch_add(1);  // the ranks' policies run on their own threads
    return action;
  }
  void completed(const sc::Action& action) override { inner_->completed(action); }
  bool finished() const override { return inner_->finished(); }
  void reset() override { inner_->reset(); }
  std::string describe_wait(const sc::ReadySet& ready) const override {
    return inner_->describe_wait(ready);
  }
  std::size_t total_actions() const override { return inner_->total_actions(); }

 private:
  std::unique_ptr<sc::SchedulePolicy> inner_;
  std::atomic<int>* handed_out_;
};

}  // namespace

TEST_CASE("a CSV order written by tp-sim, and an edited one, train like the unsplit model",
          "[schedule][orders]") {
  // tp-sim --schedule ZBVZeroBubble --ranks 2 --microbatches 4 --csv zbv_2ranks_4mb.csv
  const std::string written = data_file("zbv_2ranks_4mb.csv");
  // The same with every W moved to the end of its rank (a valid, different order).
  const std::string edited = data_file("zbv_2ranks_4mb_w_last.csv");
  for (const std::string& path : {written, edited}) {
    DYNAMIC_SECTION(path) {
      Chain chain(4);
      sc::PipelineOrder order = sc::load_csv(path);
      pp::ScheduleZBVZeroBubble schedule(chain.stages, 4, tp::nn::mse_loss, {.order = order});
      CHECK(schedule.order() == order);
      chain.check_step(schedule, 4);
      chain.check_step(schedule, 4);
    }
  }
  // The edited order really differs from the generated one.
  CHECK(sc::load_csv(edited) != sc::load_csv(written));
}

TEST_CASE("a CSV with communication actions runs its compute order", "[schedule][orders]") {
  Chain chain(2);
  sc::PipelineOrder with_comms = sc::parse_csv(
      "0F0,0SEND_F0,0F1,0SEND_F1,0RECV_B0,0B0,0RECV_B1,0B1\n"
      "1RECV_F0,1F0,1RECV_F1,1F1,1B0,1SEND_B0,1B1,1SEND_B1\n",
      sc::CsvFormat::WithCommunication);
  pp::ScheduleGPipe schedule(chain.stages, 2, tp::nn::mse_loss, {.order = with_comms});
  CHECK(sc::to_string(schedule.order()[1]) == "1F0 1F1 1B0 1B1");
  chain.check_step(schedule, 2);
}

TEST_CASE("an invalid CSV order is rejected before any step, with the validator's table",
          "[schedule][orders][errors]") {
  Chain chain(2);
  // Rank 1 runs the backward of microbatch 1 before its forward.
  sc::PipelineOrder bad = sc::parse_csv("0F0,0F1,0B0,0B1\n1F0,1B1,1F1,1B0\n");
  try {
    pp::Schedule1F1B schedule(chain.stages, 2, tp::nn::mse_loss, {.order = bad});
    FAIL("the invalid order was accepted");
  } catch (const sc::ScheduleError& e) {
    std::string what = e.what();
    CHECK_THAT(what, Catch::Contains("1F1B: the given order cannot run"));
    CHECK_THAT(what, Catch::Contains("without first running Forward"));
    CHECK_THAT(what, Catch::Contains("Full pipeline schedule:"));
    CHECK_THAT(what, Catch::Contains("<-- ERROR HERE"));
  }
  // A missing action, a row too many, a stage on the wrong rank.
  CHECK_THROWS_WITH(pp::Schedule1F1B(chain.stages, 2, tp::nn::mse_loss,
                                     {.order = sc::parse_csv("0F0,0F1,0B0,0B1\n1F0,1F1,1B0\n")}),
                    Catch::Contains("Missing"));
  CHECK_THROWS_WITH(
      pp::Schedule1F1B(chain.stages, 2, tp::nn::mse_loss,
                       {.order = sc::parse_csv("0F0,0F1,0B0,0B1\n1F0,1F1,1B0,1B1\n\n2F0\n")}),
      Catch::Contains("4 rows") && Catch::Contains("2 ranks"));
  CHECK_THROWS_AS(pp::Schedule1F1B(chain.stages, 2, tp::nn::mse_loss,
                                   {.order = sc::parse_csv("1F0,1F1,1B0,1B1\n0F0,0F1,0B0,0B1\n")}),
                  sc::ScheduleError);
}

TEST_CASE("the dynamic policy under a cap of 2 never holds more (message log)",
          "[schedule][policy]") {
  for (auto kind : {sc::ScheduleKind::GPipe, sc::ScheduleKind::ZBVZeroBubble}) {
    for (bool split : {false, true}) {
      DYNAMIC_SECTION(sc::schedule_name(kind) << (split ? " I+W" : " B")) {
        const int n = 8;
        Chain chain(4);
        std::string log = log_capture::capture_message_log(
            [&] {
              pp::PipelineSchedule schedule(
                  chain.stages, n, tp::nn::mse_loss, kind,
                  {.policy = sc::dynamic_policies(
                       {.split_backward = split, .max_stashed_activations = 2})});
              chain.check_step(schedule, n);
            },
            /*debug=*/true);
        std::istringstream in(log);
        auto events = pp::parse_message_log(in);
        auto steps = pp::logged_steps(events);
        REQUIRE(steps.size() == 1);
        sc::SimulationResult timeline = pp::step_timeline(events, steps[0]);
        REQUIRE(!timeline.peak_activations.empty());
        int most = 0;
        for (int peak : timeline.peak_activations) {
          CHECK(peak <= 2);
          most = std::max(most, peak);
        }
        CHECK(most == 2);  // the cap is reached, so it is what held the ranks back
        // Every action ran: F, and B or I+W, of each microbatch on each stage.
        CHECK(timeline.actions == static_cast<size_t>(4 * n * (split ? 3 : 2)));
      }
    }
  }
}

TEST_CASE("a cap below the local stages is a clear error at construction", "[schedule][policy]") {
  Chain chain(4);
  CHECK_THROWS_WITH(
      pp::ScheduleZBVZeroBubble(chain.stages, 4, tp::nn::mse_loss,
                                {.policy = sc::dynamic_policies({.max_stashed_activations = 1})}),
      Catch::Contains("max_stashed_activations = 1"));
}

TEST_CASE("a user's policy object drives the stage actors", "[schedule][policy]") {
  Chain chain(4);
  std::atomic<int> handed_out = 0;
  sc::PolicyFactory factory = [&](const sc::PolicyContext& context) {
    return std::make_unique<CountingPolicy>(sc::static_order_policies()(context), &handed_out);
  };
  pp::ScheduleInterleavedZeroBubble schedule(chain.stages, 4, tp::nn::mse_loss,
                                             {.policy = factory});
  chain.check_step(schedule, 4);
  CHECK(handed_out.load() == 4 * 4 * 3);  // F, I and W of 4 microbatches on 4 stages
}

TEST_CASE("register_custom_function runs OVERLAP_F_B", "[schedule][custom]") {
  Chain chain(4);
  pp::ScheduleDualPipeV schedule(chain.stages, 8, tp::nn::mse_loss);
  size_t overlaps = 0;
  for (const auto& rank : schedule.order())
    for (const auto& a : rank) overlaps += a.kind == sc::ActionKind::OverlapFB;
  REQUIRE(overlaps > 0);
  std::atomic<size_t> calls{0};
  schedule.register_custom_function(
      sc::ActionKind::OverlapFB, [&](const sc::Action& action, const pp::CustomFunctionContext& c) {
        ++calls;
        // Backward first: the two halves are independent, any order is correct.
        c.run(action.sub_actions.at(1));
        c.run(action.sub_actions.at(0));
      });
  chain.check_step(schedule, 8);
  CHECK(calls == overlaps);

  // A function that skips a half fails the step, naming it; a fixed one recovers.
  schedule.register_custom_function(
      sc::ActionKind::OverlapFB, [](const sc::Action& action, const pp::CustomFunctionContext& c) {
        c.run(action.sub_actions.at(0));
      });
  CHECK_THROWS_WITH(schedule.step({tp::randn({16, kDim})}, {.target = tp::randn({16, kDim})}),
                    Catch::Contains("returned without running"));
  for (auto& s : chain.stages) s->module().zero_grad();
  schedule.register_custom_function(sc::ActionKind::OverlapFB, nullptr);
  chain.check_step(schedule, 8);

  CHECK_THROWS_WITH(schedule.register_custom_function(sc::ActionKind::Forward, nullptr),
                    Catch::Contains("only OVERLAP_F_B"));
}
