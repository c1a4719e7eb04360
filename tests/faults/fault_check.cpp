// One rank of a fault check, started by tp-launch: four ranks train under 1F1B and, in the middle
// of a step, one rank (the victim) is killed with SIGKILL or stopped with SIGSTOP from inside its
// stage's forward. Every other rank must get its step's error on time, naming the victim.
// Prints one "fault-check" line per surviving rank; exits 3 when that rank saw what it should (so
// that tp-launch stops the job), 1 when not.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <string>
#include <thread>

#include "tensorplay/distributed/detail/group_runtime.h"
#include "tensorplay/distributed/process_group.h"
#include "tensorplay/observe/message_log.h"
#include "tensorplay/pipelining/runtime/schedule.h"
#include "tensorplay/tensor.h"
#include "tensorplay/wire/protocol.h"

namespace tp = tensorplay;
namespace pp = tensorplay::pipelining;
namespace dist = tensorplay::distributed;
using Clock = std::chrono::steady_clock;

namespace {

constexpr int64_t kWidth = 16;
constexpr int kMicrobatches = 8;
constexpr int kFaultStep = 3;        // the step in which the victim fails
constexpr int kFaultMicrobatch = 3;  // during its forward of this microbatch

struct Args {
  // "kill", "stop", "none" (train `steps` steps, a little slowly), or "fuzz" (rank 0 floods
  // rank 1 with malformed notifications between two steps; both train on)
  std::string fault;
  int messages = 100000;
  int steps = kFaultStep;
  int victim = 1;
  std::string dir;  // where the victim writes the time of its fault
  int step_timeout_ms = 60000;
  int limit_ms = 10000;  // a survivor's error must come within this long
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--fault")
      a.fault = value;
    else if (flag == "--victim")
      a.victim = std::stoi(value);
    else if (flag == "--dir")
      a.dir = value;
    else if (flag == "--step-timeout-ms")
      a.step_timeout_ms = std::stoi(value);
    else if (flag == "--messages")
      a.messages = std::stoi(value);
    else if (flag == "--steps")
      a.steps = std::stoi(value);
    else if (flag == "--limit-ms")
      a.limit_ms = std::stoi(value);
    else if (flag != "--tag")  // --tag marks the job's processes for the caller's leak check
      throw std::invalid_argument("unknown flag " + flag);
  }
  if (a.fault != "kill" && a.fault != "stop" && a.fault != "none" && a.fault != "fuzz")
    throw std::invalid_argument("--fault must be kill, stop, none or fuzz");
  return a;
}

int64_t wall_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

/// Linear whose victim rank fails inside the forward of the chosen step and microbatch.
struct FaultyLinear : tp::nn::Module {
  FaultyLinear(const Args& args, bool victim) : args_(args), victim_(victim) {
    lin = register_module("lin", tp::nn::Linear(kWidth, kWidth));
  }
  tp::Tensor forward(const tp::Tensor& x) override {
    if ((args_.fault == "kill" || args_.fault == "stop") && victim_ &&
        ++calls_ == (kFaultStep - 1) * kMicrobatches + kFaultMicrobatch + 1) {
      {
        std::ofstream out(args_.dir + "/fault_time");
        out << wall_ns() << "\n";
      }
      std::printf("fault-check rank %d: %s now\n", dist::get_rank(),
                  args_.fault == "kill" ? "SIGKILL" : "SIGSTOP");
      std::fflush(stdout);
      ::raise(args_.fault == "kill" ? SIGKILL : SIGSTOP);
    }
    return tp::tanh(lin(x));
  }
  const Args& args_;
  bool victim_;
  int calls_ = 0;
  tp::nn::Linear lin{nullptr};
};

/// One malformed notification for rank 1's stage (hosted there, fed by rank 0's stage 0): a
/// valid one broken in one of several ways, each of which the receiver must reject. `step` is
/// one that is over: a notification from the neighbour that differs only in its tensors (the
/// wrong dtype or shape) fails the step it names while that step can still run, and is only
/// counted once it is over (tests/faults/mismatch_check.cpp covers the live case).
std::string malformed(std::mt19937_64& random, uint64_t step) {
  pp::Notification n{step, 1, pp::Direction::Forward, 0, 0, {}};
  n.tensors.push_back({{2, kWidth}, tp::DType::Float32, 2 * kWidth * 4, true});
  n.microbatch = static_cast<int>(random() % kMicrobatches);
  std::string bytes;
  switch (random() % 10) {
    case 0:  // truncated anywhere
      bytes = pp::encode_message(n);
      bytes.resize(random() % bytes.size());
      return bytes;
    case 1:  // random bytes (a wrong version first)
      bytes.resize(random() % 200);
      for (char& c : bytes) c = static_cast<char>(random());
      if (!bytes.empty()) bytes[0] = static_cast<char>(2 + random() % 200);
      return bytes;
    case 2:  // a stage rank 1 does not host
      n.stage = random() % 2 ? 0 : 2 + static_cast<int>(random() % 1000000);
      break;
    case 3:  // a microbatch out of range
      n.microbatch = kMicrobatches + static_cast<int>(random() % 1000000);
      break;
    case 4:  // from the wrong rank
      n.source = 1 + static_cast<int>(random() % 1000);
      break;
    case 5:  // a gradient for a stage whose gradients come from another rank
      n.direction = pp::Direction::Backward;
      n.source = 0;
      break;
    case 6:  // the wrong dtype, with matching bytes
      n.tensors[0].dtype = tp::DType::BFloat16;
      n.tensors[0].bytes = 2 * kWidth * 2;
      break;
    case 7:  // the wrong shape or count
      if (random() % 2)
        n.tensors[0].shape = {2, kWidth + 1 + static_cast<int64_t>(random() % 100)};
      else
        n.tensors.push_back(n.tensors[0]);
      n.tensors[0].bytes = 4 * static_cast<uint64_t>(n.tensors[0].shape[0] * n.tensors[0].shape[1]);
      break;
    case 8:  // bytes that disagree with the shape, or a huge shape
      n.tensors[0].bytes += 1 + random() % 4096;
      if (random() % 2) n.tensors[0].shape[0] = int64_t{1} << 40;
      break;
    default:  // a step that cannot be
      n.step = random() % 2 ? 0 : (uint64_t{1} << 41) + random() % 1000;
      break;
  }
  return pp::encode_message(n);
}

/// Rank 0 sends `args.messages` malformed notifications to rank 1 on the schedule's stream, for
/// step `finished` (the last one done); rank 1 waits until it has rejected every one of them
/// (bounded), then both go on training.
void flood(pp::PipelineSchedule& schedule, const Args& args, uint64_t finished) {
  const int rank = dist::get_rank();
  const auto before = pp::rejected_message_count();
  // Rank 1 counts from here: no message may be sent before it has read its count.
  dist::world_group().barrier();
  const auto started = Clock::now();
  if (rank == 0) {
    auto* cluster = dist::detail::default_runtime();
    std::mt19937_64 random(2024);
    for (int i = 0; i < args.messages; ++i)
      cluster->ucx()->send_message(1, schedule.transport_stream(), malformed(random, finished));
  }
  if (rank == 1) {
    while (pp::rejected_message_count() - before < static_cast<unsigned long long>(args.messages)) {
      if (Clock::now() - started > std::chrono::seconds(20))
        throw std::runtime_error("only " + std::to_string(pp::rejected_message_count() - before) +
                                 " of " + std::to_string(args.messages) +
                                 " malformed messages were rejected within 20 s");
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    const auto ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - started).count();
    std::printf("fault-check rank 1: rejected %llu malformed messages in %lld ms\n",
                pp::rejected_message_count() - before, static_cast<long long>(ms));
    std::fflush(stdout);
  }
  dist::world_group().barrier();
}

}  // namespace

int main(int argc, char** argv) {
  try {
    Args args = parse(argc, argv);
    // tp-launch stops the other ranks when the victim dies: a survivor finishes its report first.
    ::signal(SIGTERM, SIG_IGN);
    dist::init_process_group({.timeout = std::chrono::seconds(30)});
    const int rank = dist::get_rank(), world = dist::get_world_size();
    if (rank == 0) {
      std::printf("fault-check rank 0: every rank joined\n");
      std::fflush(stdout);
    }
    tp::manual_seed(5 + rank);
    auto module = std::make_shared<FaultyLinear>(args, rank == args.victim);
    auto stage = std::make_shared<pp::PipelineStage>(
        module, rank, world, tp::cpu(), std::vector<tp::Tensor>{tp::zeros({2, kWidth})});
    pp::Schedule1F1B schedule(*stage, kMicrobatches, tp::nn::mse_loss,
                              {.step_timeout = std::chrono::milliseconds(args.step_timeout_ms)});
    tp::Generator data(17);
    const bool no_fault = args.fault == "none" || args.fault == "fuzz";
    const int steps = no_fault ? args.steps : kFaultStep;
    for (int step = 1; step <= steps; ++step) {
      if (args.fault == "fuzz" && step == steps / 2 + 1) flood(schedule, args, step - 1);
      if (args.fault == "none") std::this_thread::sleep_for(std::chrono::milliseconds(40));
      tp::Tensor x = tp::randn({2 * kMicrobatches, kWidth}, {}, &data);
      tp::Tensor y = tp::randn({2 * kMicrobatches, kWidth}, {}, &data);
      const auto started = Clock::now();
      try {
        if (rank == 0)
          schedule.step({x});
        else if (rank == world - 1)
          schedule.step({}, {.target = y});
        else
          schedule.step({});
      } catch (const pp::PipelineError& e) {
        const auto failed_ns = wall_ns();
        const auto since_start =
            std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - started).count();
        int64_t fault_ns = 0;
        std::ifstream(args.dir + "/fault_time") >> fault_ns;
        const long long since_fault = fault_ns > 0 ? (failed_ns - fault_ns) / 1000000 : -1;
        const std::string what = e.what();
        const std::string victim = "rank " + std::to_string(args.victim);
        const bool names_victim = what.find(victim) != std::string::npos;
        // SIGKILL: measured from the kill; SIGSTOP: the step's own timeout plus its 10%.
        const long long took = args.fault == "kill" ? since_fault : since_start;
        const bool on_time = step == kFaultStep && took >= 0 && took <= args.limit_ms;
        std::printf(
            "fault-check rank %d: %s step %d failed %lld ms after the %s (%lld ms after it "
            "began), naming %s: %s\n",
            rank, names_victim && on_time ? "OK" : "WRONG", step, since_fault,
            args.fault == "kill" ? "kill" : "stop", static_cast<long long>(since_start),
            names_victim ? victim.c_str() : "someone else", what.c_str());
        std::fflush(stdout);
        return names_victim && on_time ? 3 : 1;
      }
    }
    if (no_fault) {
      std::printf("fault-check rank %d: trained %d steps\n", rank, steps);
      return 0;
    }
    std::printf("fault-check rank %d: WRONG: no step failed\n", rank);
    return 1;
  } catch (const std::exception& e) {
    std::printf("fault-check rank %d: WRONG: %s\n", dist::get_rank(), e.what());
    return 1;
  }
}
