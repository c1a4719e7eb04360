// bench_control_hop: what one forward notification costs between two stage actors of one process
// (a microbatch's output handed to the next stage and the next actor told), against a raw CAF
// message between two detached actors of the same kind. The stage side runs forward-only steps of
// one microbatch through chains of 2 and 16 stages whose forward does nothing (timed_stage.h with
// zero waits): the difference over the 14 extra hops is the cost of one hop, free of the step's
// fixed costs. The raw side bounces a message between two detached actors (one message is one
// hop). Each rank of a step also reports done to the step's driver, a second message per extra
// stage, so the chain difference bounds the hop from above; the message log gives the hop itself:
// from a stage's "start F" to the next stage's "start F" (an empty forward, its output handed
// over, the notification sent and received, the receive posted, the policy asked), with the
// log's own formatting inside it. The last line holds
// "bench" and the ratio of the logged hop to the raw one (goal: at most 1.5).
// It also gives the hop's own work without threads: the same 16 stages' workers (StageWorker, no
// actors) run the same steps in one thread, each notification handed straight to the next
// worker; per stage, that is a step's share of the work a hop does (begin, accept, forward,
// hand-over) with warm caches, the part of a hop that code can shorten.
//
//   bench_control_hop [steps, default 2000] [raw hops, default 200000]
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <caf/all.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <map>
#include <sstream>

#include "tensorplay/observe/message_log.h"
#include "tensorplay/observe/trace_log.h"
#include "tensorplay/pipelining/runtime/schedule.h"
#include "tensorplay/pipelining/runtime/stage_placement.h"
#include "tensorplay/pipelining/runtime/stage_worker.h"
#include "tensorplay/schedules/policy.h"
#include "tensorplay/schedules/schedule_kind.h"
#include "tensorplay/transport/local_channel.h"
#include "timed_stage.h"

namespace tp = tensorplay;
namespace pp = tensorplay::pipelining;
namespace sc = tensorplay::schedules;

namespace {

using hop_atom = caf::atom_constant<caf::atom("hop")>;
using done_atom = caf::atom_constant<caf::atom("done")>;

/// Passes the hop counter to `other` until it reaches zero, then tells `main`.
caf::behavior bouncer(caf::event_based_actor* self, caf::actor main) {
  return {[=](hop_atom, int32_t left, const caf::actor& other) {
    if (left == 0) {
      self->send(main, done_atom::value);
      return;
    }
    self->send(other, hop_atom::value, left - 1, caf::actor_cast<caf::actor>(self));
  }};
}

/// Microseconds per hop of a raw CAF message between two detached actors (best of 3).
double raw_hop_us(int hops) {
  caf::actor_system_config config;
  config.set("scheduler.max-threads", size_t{2});
  config.set("scheduler.policy", caf::atom("sharing"));
  caf::actor_system system{config};
  double best = 1e300;
  {
    caf::scoped_actor self{system};
    auto a = system.spawn<caf::detached>(bouncer, caf::actor{self});
    auto b = system.spawn<caf::detached>(bouncer, caf::actor{self});
    for (int run = 0; run < 4; ++run) {
      auto t0 = std::chrono::steady_clock::now();
      self->send(a, hop_atom::value, static_cast<int32_t>(hops), b);
      bool done = false;
      self->receive([&](done_atom) { done = true; }, caf::after(std::chrono::seconds(60)) >> [] {});
      if (!done) {
        std::fprintf(stderr, "bench_control_hop: the raw CAF bounce did not finish in 60 s\n");
        std::exit(1);
      }
      auto t1 = std::chrono::steady_clock::now();
      if (run > 0)  // the first run warms up
        best = std::min(best, std::chrono::duration<double, std::micro>(t1 - t0).count() / hops);
    }
    self->send_exit(a, caf::exit_reason::user_shutdown);
    self->send_exit(b, caf::exit_reason::user_shutdown);
    self->wait_for(a, b);
  }
  return best;
}

/// Microseconds per forward-only step of one microbatch through `num_stages` stages (median).
double step_us(int num_stages, int steps) {
  const timed_stage::Waits none{std::chrono::microseconds(0), std::chrono::microseconds(0),
                                std::chrono::microseconds(0)};
  auto stages = timed_stage::make_stages(num_stages, none);
  pp::PipelineSchedule schedule(stages, 1, nullptr, sc::ScheduleKind::GPipe);
  tp::Tensor x = tp::zeros({1, 4});
  for (int i = 0; i < 100; ++i) schedule.eval({x});
  std::vector<double> times;
  for (int i = 0; i < steps; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    schedule.eval({x});
    auto t1 = std::chrono::steady_clock::now();
    times.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
  }
  std::nth_element(times.begin(), times.begin() + times.size() / 2, times.end());
  return times[times.size() / 2];
}

/// Microseconds per stage of a forward-only step of one microbatch through `num_stages` stage
/// workers driven in this thread (no actors, no wake-ups): each rank's step begun, stage 0 run,
/// every notification accepted by the next worker at once (best of 3 rounds of `steps`).
double worker_us(int num_stages, int steps) {
  const timed_stage::Waits none{std::chrono::microseconds(0), std::chrono::microseconds(0),
                                std::chrono::microseconds(0)};
  auto stages = timed_stage::make_stages(num_stages, none);
  auto channel = std::make_shared<tp::transport::LocalChannel>();
  const sc::PipelineOrder order = sc::generate_order(sc::ScheduleKind::GPipe, num_stages, 1, 1);
  std::vector<int> stage_to_peer(num_stages);
  for (int s = 0; s < num_stages; ++s) stage_to_peer[s] = s;
  std::vector<std::unique_ptr<pp::StageWorker>> workers;
  for (int r = 0; r < num_stages; ++r)
    workers.push_back(
        std::make_unique<pp::StageWorker>(r, std::vector<pp::PipelineStage*>{stages[r].get()},
                                          num_stages, 1, sc::make_static_order_policy(order[r]),
                                          sc::make_static_order_policy(pp::forward_only(order[r])),
                                          channel, std::chrono::seconds(5), stage_to_peer, r));
  const tp::Tensor x = tp::zeros({1, 4});
  std::deque<pp::Notification> sent;
  const auto send = [&](pp::Notification&& note) { sent.push_back(std::move(note)); };
  const pp::ActionObserver no_observer;
  uint64_t step = 0;
  double best = 1e300;
  for (int round = 0; round < 4; ++round) {  // the first warms up
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < steps; ++i) {
      auto data = std::make_shared<pp::StepData>();
      data->step = ++step;
      data->training = false;
      data->keep_outputs = false;
      data->microbatch_inputs = {{x}};
      for (auto& w : workers) w->begin_step(data);
      workers[0]->run_ready(send, no_observer);
      while (!sent.empty()) {
        const pp::Notification note = std::move(sent.front());
        sent.pop_front();
        pp::StageWorker& next = *workers.at(note.stage);
        if (next.accept(note, false, [](const pp::Notification&) {}).kind !=
            pp::Acceptance::Kind::Arrived) {
          std::fprintf(stderr, "bench_control_hop: a local hand-over did not arrive at once\n");
          std::exit(1);
        }
        next.on_arrival(note);
        next.run_ready(send, no_observer);
      }
    }
    const auto t1 = std::chrono::steady_clock::now();
    if (round > 0)
      best = std::min(
          best, std::chrono::duration<double, std::micro>(t1 - t0).count() / steps / num_stages);
  }
  return best;
}

/// Median microseconds from stage s's "start sF0" to stage s+1's "start (s+1)F0" in the message
/// log of forward-only steps through `num_stages` stages (the forward does nothing).
double logged_hop_us(int num_stages, int steps) {
  const timed_stage::Waits none{std::chrono::microseconds(0), std::chrono::microseconds(0),
                                std::chrono::microseconds(0)};
  auto stages = timed_stage::make_stages(num_stages, none);
  pp::PipelineSchedule schedule(stages, 1, nullptr, sc::ScheduleKind::GPipe);
  tp::Tensor x = tp::zeros({1, 4});
  for (int i = 0; i < 100; ++i) schedule.eval({x});
  auto logger = pp::message_log();
  auto sinks = logger->sinks();
  auto level = logger->level();
  std::ostringstream out;
  logger->sinks() = {std::make_shared<spdlog::sinks::ostream_sink_mt>(out)};
  logger->set_level(spdlog::level::debug);
  for (int i = 0; i < steps; ++i) schedule.eval({x});
  logger->flush();
  logger->sinks() = sinks;
  logger->set_level(level);
  std::istringstream in(out.str());
  std::map<std::pair<uint64_t, std::string>, int64_t> at;  // (step, event + what) -> t_us
  for (const pp::LogEvent& e : pp::parse_message_log(in))
    if (e.event == "start" || e.event == "finish") at[{e.step, e.event + e.what}] = e.t_us;
  std::vector<double> hops;
  for (const auto& [key, t] : at) {
    if (key.second.rfind("start", 0) != 0) continue;
    const int stage = std::atoi(key.second.c_str() + 5);
    auto next = at.find({key.first, "start" + std::to_string(stage + 1) + "F0"});
    if (next != at.end()) hops.push_back(static_cast<double>(next->second - t));
  }
  if (hops.empty()) return 0.0;
  std::nth_element(hops.begin(), hops.begin() + hops.size() / 2, hops.end());
  return hops[hops.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const int steps = argc > 1 ? std::max(10, std::atoi(argv[1])) : 2000;
  const int hops = argc > 2 ? std::max(100, std::atoi(argv[2])) : 200000;
  const int short_chain = 2, long_chain = 16;
  const double short_us = step_us(short_chain, steps);
  const double long_us = step_us(long_chain, steps);
  const double stage_hop = (long_us - short_us) / (long_chain - short_chain);
  std::printf("{\"stages\":%d,\"step_us\":%.2f}\n", short_chain, short_us);
  std::printf("{\"stages\":%d,\"step_us\":%.2f}\n", long_chain, long_us);
  const double logged_hop = logged_hop_us(long_chain, std::max(10, steps / 10));
  std::printf("{\"logged_hop_us\":%.2f}\n", logged_hop);
  const double raw_hop = raw_hop_us(hops);
  std::printf("{\"raw_caf_hop_us\":%.3f}\n", raw_hop);
  const double warm_work = worker_us(long_chain, std::max(10, steps * 5));
  std::printf("{\"warm_work_us\":%.3f}\n", warm_work);
  std::printf(
      "{\"bench\":\"bench_control_hop\",\"stage_hop_us\":%.3f,\"chain_hop_us\":%.3f,"
      "\"raw_caf_hop_us\":%.3f,\"warm_work_us\":%.3f,\"ratio\":%.3f,\"chain_ratio\":%.3f,"
      "\"goal\":1.5}\n",
      logged_hop, stage_hop, raw_hop, warm_work, logged_hop / raw_hop, stage_hop / raw_hop);
  return 0;
}
