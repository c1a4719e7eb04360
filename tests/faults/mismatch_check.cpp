// One rank of a mismatch check, started by tp-launch: the ranks build stages that disagree, and
// every rank must get a clear error within seconds, naming the ranks and the difference.
// At construction: ranks that cut the model at different points (`cut`), or whose models differ
// in a width (`width`) or dtype (`dtype`) at a boundary. In a step (stages built by hand, so the
// construction check cannot see it): a stage that sends a wider tensor than it declared
// (`runtime-width`, three ranks: the middle one sends) or another dtype (`runtime-dtype`; and
// `runtime-early`, where the receiver begins its step only after the tensors were rejected).
// And the control: ranks that built alike (`agree`, a deeper model) construct and train, with the
// construction's time printed. Prints one "mismatch-check rank R: OK ..." line per rank that saw
// what it should (the expected error in time, or none) and exits 0; exits 1 otherwise (so
// tp-launch stops the job and fails).
#include <chrono>
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "tensorplay/distributed/process_group.h"
#include "tensorplay/pipelining/pipeline.h"
#include "tensorplay/pipelining/runtime/schedule.h"
#include "tensorplay/tensor.h"

namespace tp = tensorplay;
namespace pp = tensorplay::pipelining;
namespace dist = tensorplay::distributed;
using Clock = std::chrono::steady_clock;

namespace {

constexpr int64_t kWidth = 16;
constexpr int kMicrobatches = 4;
constexpr double kLimitSeconds = 10;  // every rank's error must come within this long

/// Linear + tanh.
struct Block : tp::nn::Module {
  Block(int64_t in, int64_t out) { lin = register_module("lin", tp::nn::Linear(in, out)); }
  tp::Tensor forward(const tp::Tensor& x) override { return tp::tanh(lin(x)); }
  tp::nn::Linear lin{nullptr};
};

/// `layers` = one Block per consecutive pair of `widths`.
struct Stack : tp::nn::Module {
  explicit Stack(const std::vector<int64_t>& widths) {
    layers = register_module("layers", tp::nn::Sequential());
    for (size_t i = 0; i + 1 < widths.size(); ++i)
      layers->push_back(std::make_shared<Block>(widths[i], widths[i + 1]));
  }
  tp::Tensor forward(const tp::Tensor& x) override { return layers(x); }
  tp::nn::Sequential layers;
};

/// A Linear whose output is converted to `dtype` (a stage that sends another dtype than the one
/// it declared).
struct CastLinear : tp::nn::Module {
  CastLinear(int64_t in, int64_t out, tp::DType dtype) : dtype_(dtype) {
    lin = register_module("lin", tp::nn::Linear(in, out));
  }
  tp::Tensor forward(const tp::Tensor& x) override { return lin(x).to(dtype_); }
  tp::DType dtype_;
  tp::nn::Linear lin{nullptr};
};

/// A stage of three Blocks of width kWidth built from a pipe cut before `cut`; `widths` and
/// `dtype` vary the model per rank.
std::shared_ptr<pp::PipelineStage> piped_stage(const std::vector<int64_t>& widths,
                                               const std::string& cut, tp::DType dtype) {
  const int rank = dist::get_rank();
  tp::manual_seed(7);
  auto model = std::make_shared<Stack>(widths);
  model->to(dtype);
  tp::Tensor example = tp::zeros({2, kWidth}).to(dtype);
  pp::Pipe pipe =
      pp::pipeline(model, {example}, {}, {.split_spec = {{cut, pp::SplitPoint::Beginning}}});
  return std::make_shared<pp::PipelineStage>(
      pp::build_stage(pipe, rank, tp::cpu(), dist::world_group()));
}

/// A stage built by hand with declared shapes: the rank `sender` sends what `module` makes, which
/// is not the float32[2, kWidth] it declares.
std::shared_ptr<pp::PipelineStage> declared_stage(std::shared_ptr<tp::nn::Module> module) {
  const int rank = dist::get_rank(), world = dist::get_world_size();
  std::vector<pp::TensorMeta> meta{{tp::Shape{2, kWidth}, tp::DType::Float32}};
  auto stage =
      std::make_shared<pp::PipelineStage>(std::move(module), rank, world, tp::cpu(), meta, meta);
  stage->set_mesh(dist::world_group());
  return stage;
}

/// The stage this rank builds for `which`, and the words every rank's error must hold.
std::shared_ptr<pp::PipelineStage> build(const std::string& which,
                                         std::vector<std::string>& expect) {
  const int rank = dist::get_rank();
  const auto f32 = tp::DType::Float32;
  if (which == "agree") {  // no error: 16 layers cut alike on every rank
    expect.clear();
    return piped_stage(std::vector<int64_t>(17, kWidth), "layers.8", f32);
  }
  if (which == "cut") {
    expect = {"rank 0", "cuts before layers.1", "rank 1", "before layers.2"};
    return piped_stage({kWidth, kWidth, kWidth, kWidth}, rank == 0 ? "layers.1" : "layers.2", f32);
  }
  if (which == "width") {
    expect = {"stage 1 expects float32[2,32] from stage 0", "rank 0", "sends float32[2,16]"};
    std::vector<int64_t> widths{kWidth, rank == 0 ? kWidth : 2 * kWidth, kWidth, kWidth};
    return piped_stage(widths, "layers.1", f32);
  }
  if (which == "dtype") {
    expect = {"stage 1 expects float32[2,16] from stage 0", "rank 0", "sends bfloat16[2,16]"};
    return piped_stage({kWidth, kWidth, kWidth, kWidth}, "layers.1",
                       rank == 0 ? tp::DType::BFloat16 : f32);
  }
  if (which == "runtime-width") {  // three ranks: rank 1 sends width 17 to rank 2
    expect = {"rejected input 2:", "from rank 1", "float32[2,17]", "expects float32[2,16]"};
    return declared_stage(tp::nn::Linear(kWidth, rank == 1 ? kWidth + 1 : kWidth).ptr());
  }
  if (which == "runtime-dtype" || which == "runtime-early") {  // rank 0 sends bfloat16 to rank 1
    expect = {"rejected input 1:", "from rank 0", "bfloat16[2,16]", "expects float32[2,16]"};
    return declared_stage(
        std::make_shared<CastLinear>(kWidth, kWidth, rank == 0 ? tp::DType::BFloat16 : f32));
  }
  throw std::invalid_argument(
      "--case must be agree, cut, width, dtype, runtime-width, runtime-dtype or runtime-early");
}

/// Builds the schedule (its time in `construction_ms`) and runs two steps; returns the first
/// error, or an empty string.
std::string run(const std::string& which, std::vector<std::string>& expect,
                double& construction_ms) {
  const int rank = dist::get_rank(), world = dist::get_world_size();
  try {
    std::shared_ptr<pp::PipelineStage> stage = build(which, expect);
    dist::barrier();  // time the construction alone, every rank starting together
    const auto started = Clock::now();
    // A step timeout longer than the limit: an error that only the timeout gives is too late.
    pp::Schedule1F1B schedule(*stage, kMicrobatches, tp::nn::mse_loss,
                              {.step_timeout = std::chrono::seconds(20)});
    construction_ms = std::chrono::duration<double, std::milli>(Clock::now() - started).count();
    for (int step = 1; step <= 2; ++step) {
      // The last rank late: rank 0's notifications come before its step has begun.
      if (which == "runtime-early" && rank == world - 1)
        std::this_thread::sleep_for(std::chrono::milliseconds(500));
      tp::Tensor x = tp::randn({2 * kMicrobatches, kWidth});
      tp::Tensor y = tp::randn({2 * kMicrobatches, kWidth});
      if (stage->is_first()) x = x.to(stage->input_meta()[0].dtype);
      if (rank == 0)
        schedule.step({x});
      else if (rank == world - 1)
        schedule.step({}, {.target = y.to(stage->output_meta()[0].dtype)});
      else
        schedule.step({});
    }
  } catch (const std::exception& e) {
    return e.what();
  }
  return {};
}

}  // namespace

int main(int argc, char** argv) {
  try {
    std::string which;
    for (int i = 1; i + 1 < argc; i += 2)
      if (std::string(argv[i]) == "--case") which = argv[i + 1];
    dist::init_process_group({.timeout = std::chrono::seconds(30)});
    const int rank = dist::get_rank();
    std::vector<std::string> expect;
    double construction_ms = -1;
    const auto started = Clock::now();
    const std::string error = run(which, expect, construction_ms);
    const double seconds = std::chrono::duration<double>(Clock::now() - started).count();
    bool ok = error.empty() == expect.empty() && seconds < kLimitSeconds;
    for (const std::string& words : expect) ok = ok && error.find(words) != std::string::npos;
    std::printf("mismatch-check rank %d: %s after %.2f s (construction %.1f ms): %s\n", rank,
                ok ? "OK" : "WRONG", seconds, construction_ms,
                error.empty() ? "no error (the ranks trained)" : error.c_str());
    std::fflush(stdout);
    return ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::printf("mismatch-check rank %d: WRONG: %s\n", dist::get_rank(), e.what());
    std::fflush(stdout);
    return 1;
  }
}
