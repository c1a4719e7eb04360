// The rank runtime over CAF stage actors: a step goes to this process's actors (last rank first),
// their failures and one done message (from the last to finish) come back to the driver's scoped
// actor, status requests go to every rank's status actor at once, and stopping waits (bounded)
// for the actors to exit.
#include "tensorplay/pipelining/runtime/detail/actor_ranks.h"

#include <algorithm>
#include <cstdio>
#include <set>
#include <thread>

#include "tensorplay/pipelining/runtime/detail/local_messages.h"

namespace tensorplay::pipelining::detail {

ActorRanks::~ActorRanks() {
  if (stopped_) return;
  for (const StageActorHandle& a : local_actors_)
    caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
}

void ActorRanks::dispatch(std::shared_ptr<StepData> data) {
  self_ = std::make_unique<caf::scoped_actor>(system_);
  const uint64_t step = data->step;
  StepHandle handle(std::move(data));
  auto tally = std::make_shared<StepTally>(local_ranks());
  done_reports_ = 0;
  // Last rank first: every rank has its step before any neighbour can notify it.
  for (auto it = local_actors_.rbegin(); it != local_actors_.rend(); ++it)
    (*self_)->send(*it, step_atom::value, step, handle, tally);
}

std::optional<RankReport> ActorRanks::next_report(uint64_t step, Deadline deadline) {
  // One done message reports several ranks: the reports it stands for come out one by one.
  if (done_reports_ > 0) {
    --done_reports_;
    return RankReport{true, done_rank_, {}};
  }
  std::optional<RankReport> out;
  while (!out) {
    auto left = std::chrono::duration_cast<std::chrono::microseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return std::nullopt;
    bool expired = false;
    (*self_)->receive(
        [&](done_atom, uint64_t s, int rank, int32_t ranks) {
          if (s != step) return;
          out = RankReport{true, rank, {}};
          done_rank_ = rank;
          done_reports_ = std::max(0, static_cast<int>(ranks) - 1);
        },
        [&](failed_atom, uint64_t s, int rank, const std::string& what) {
          if (s == step) out = RankReport{false, rank, what};
        },
        caf::after(left) >> [&] { expired = true; });
    if (expired) return std::nullopt;
  }
  return out;
}

std::string ActorRanks::collect_status(uint64_t step, Deadline deadline) {
  caf::scoped_actor& self = *self_;
  // All requests go out at once; each answer is awaited until the common deadline.
  auto left = std::max(std::chrono::duration_cast<std::chrono::milliseconds>(
                           deadline - std::chrono::steady_clock::now()),
                       std::chrono::milliseconds(1));
  std::vector<std::string> answers(status_actors_.size());
  using Handle = decltype(self->request<caf::message_priority::high>(status_actors_[0], left,
                                                                     status_atom::value, step));
  std::vector<Handle> pending;
  for (const StatusActorHandle& a : status_actors_)
    pending.push_back(
        self->request<caf::message_priority::high>(a, left, status_atom::value, step));
  for (size_t r = 0; r < pending.size(); ++r) {
    pending[r].receive([&](const std::string& s) { answers[r] = s; },
                       [&](const caf::error&) {
                         answers[r] = describe_rank(static_cast<int>(r)) +
                                      " did not answer within " + std::to_string(left.count()) +
                                      " ms (stopped, or its process is busy)";
                       });
  }
  // The ranks computing come first: one stuck in compute is the likely cause, the ranks waiting
  // for it are its consequence.
  std::stable_partition(answers.begin(), answers.end(), [](const std::string& a) {
    return a.find(" is running ") != std::string::npos ||
           a.find(" did not answer ") != std::string::npos;
  });
  std::string out;
  for (const std::string& a : answers) out += " [" + a + "]";
  return out;
}

std::vector<std::string> ActorRanks::abort(uint64_t step, Deadline deadline) {
  for (const StageActorHandle& a : local_actors_)
    caf::anon_send<caf::message_priority::high>(a, abort_atom::value, step);
  std::vector<std::string> stuck;
  for (const auto& worker : local_workers_) {
    // A rank between actions drops the step at once; one inside a stage's compute cannot.
    while (worker->aborted_step() < step && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    if (worker->aborted_step() < step) {
      std::string busy = worker->running();
      stuck.push_back(busy.empty() ? "rank " + std::to_string(worker->rank()) +
                                         " had not dropped the step yet"
                                   : busy);
    }
  }
  cancel_transfers();
  return stuck;
}

std::string ActorRanks::still_in(uint64_t step) const {
  for (const auto& worker : local_workers_) {
    if (worker->aborted_step() >= step) continue;
    std::string busy = worker->running();
    return busy.empty() ? "rank " + std::to_string(worker->rank()) + " has not dropped it yet"
                        : busy;
  }
  return {};
}

std::vector<std::string> ActorRanks::stop(std::chrono::milliseconds wait) {
  if (stopped_) return {};
  stopped_ = true;
  detach();
  // An actor stuck in a stage's compute ends when that returns (it holds the stages alive until
  // then), and is reported rather than waited for.
  caf::scoped_actor self{system_};
  std::set<caf::actor_addr> running;
  for (const StageActorHandle& a : local_actors_) {
    self->monitor(a);
    self->send_exit(a, caf::exit_reason::user_shutdown);
    running.insert(a.address());
  }
  auto deadline = std::chrono::steady_clock::now() + wait;
  while (!running.empty()) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    self->receive([&](const caf::down_msg& m) { running.erase(m.source); },
                  caf::after(left) >> [] {});
  }
  std::vector<std::string> stuck;
  for (size_t r = 0; r < local_actors_.size(); ++r) {
    if (!running.count(local_actors_[r].address())) continue;
    std::string busy = local_workers_.at(r)->running();
    stuck.push_back(busy.empty() ? "busy" : busy);
  }
  return stuck;
}

}  // namespace tensorplay::pipelining::detail
