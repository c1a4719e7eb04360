// Test support: replicas of a data-parallel group as threads of this process meeting in memory
// (a ReplicaExchange without a job), each collective bounded in time.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "tensorplay/pipelining/checkpoints/replica_exchange.h"

namespace stages_test {

/// Where the replicas' all_gathers meet: each round ends when all `n` have given their bytes.
struct Meeting {
  explicit Meeting(int n) : slots(n) {}
  std::mutex mutex;
  std::condition_variable cv;
  std::vector<std::string> slots, result;
  int arrived = 0;
  uint64_t round = 0;
};

/// Replica `rank` of the replicas meeting at `meeting`; all_gather waits at most 30 s.
class FakeReplicas final : public tensorplay::pipelining::ReplicaExchange {
 public:
  FakeReplicas(std::shared_ptr<Meeting> meeting, int rank, size_t piece = kPieceBytes)
      : meeting_(std::move(meeting)), rank_(rank), piece_(piece) {}
  int size() const override { return static_cast<int>(meeting_->slots.size()); }
  int rank() const override { return rank_; }
  size_t piece_bytes() const override { return piece_; }
  std::vector<std::string> all_gather(const std::string& bytes) override {
    std::unique_lock lock(meeting_->mutex);
    ++calls;
    meeting_->slots[rank_] = bytes;
    if (++meeting_->arrived == size()) {
      meeting_->result = meeting_->slots;
      meeting_->arrived = 0;
      ++meeting_->round;
      meeting_->cv.notify_all();
      return meeting_->result;
    }
    const uint64_t round = meeting_->round;
    if (!meeting_->cv.wait_for(lock, std::chrono::seconds(30),
                               [&] { return meeting_->round != round; }))
      throw std::runtime_error("fake replicas: replica " + std::to_string(rank_) + " waited 30 s");
    return meeting_->result;
  }
  int calls = 0;  ///< all_gathers this replica made

 private:
  std::shared_ptr<Meeting> meeting_;
  int rank_;
  size_t piece_;
};

/// Runs `work(replica)` for `n` replicas, one thread each; returns each one's error ("" if none).
/// `work` makes no Catch2 assertion (they are not thread-safe): it records what it saw, or throws,
/// and the test's thread asserts on that once run_replicas returns.
inline std::vector<std::string> run_replicas(
    int n, const std::function<void(std::shared_ptr<FakeReplicas>)>& work,
    size_t piece = tensorplay::pipelining::ReplicaExchange::kPieceBytes) {
  auto meeting = std::make_shared<Meeting>(n);
  std::vector<std::string> errors(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      try {
        work(std::make_shared<FakeReplicas>(meeting, r, piece));
      } catch (const std::exception& e) {
        errors[r] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  return errors;
}

}  // namespace stages_test
