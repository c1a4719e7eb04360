// The simulator's queue of pending events: a bucket of events per distinct time, taken earliest
// first, each bucket's events in the order they were pushed. Private to the simulator.
#pragma once

#include <cstdint>
#include <map>
#include <utility>
#include <vector>

namespace tensorplay::schedules::detail {

enum class EventKind : uint8_t { ComputeDone, InputArrived, GradArrived };

struct Event {
  int rank;
  EventKind kind;
  int stage;
  int microbatch;
};

// Pending events grouped by time: a bucket per distinct time, events in a bucket in creation
// order (deterministic). Pipelines have few distinct pending times, so this beats a binary heap
// of single events by a wide margin; with many distinct times it is still O(log n) per bucket.
// The map's node per new time costs little (the allocator recycles freed nodes at once): a
// node pool, and a flat min-heap of times with a hash from time to bucket, both measured no
// faster (the heap slower, its sift-down branches mispredicted with hundreds of times pending).
class EventQueue {
 public:
  // The event's fields are written straight into the bucket: building an Event and copying it
  // would load 16 bytes just stored in narrower parts, which the store buffer cannot forward.
  void push(double time, int rank, EventKind kind, int stage, int microbatch) {
    if (has_last_ && time == last_->first) {
      last_->second.emplace_back(rank, kind, stage, microbatch);
      return;
    }
    auto [it, inserted] = buckets_.try_emplace(time);
    if (inserted && !spare_.empty()) {
      it->second = std::move(spare_.back());
      spare_.pop_back();
    }
    it->second.emplace_back(rank, kind, stage, microbatch);
    last_ = it;
    has_last_ = true;
  }
  bool empty() const { return buckets_.empty(); }
  double next_time() const { return buckets_.begin()->first; }
  // Removes the earliest bucket into `out` (cleared first).
  void pop_bucket(std::vector<Event>& out) {
    auto it = buckets_.begin();
    if (has_last_ && last_ == it) has_last_ = false;
    out.clear();
    std::swap(out, it->second);
    spare_.push_back(std::move(it->second));
    spare_.back().clear();
    buckets_.erase(it);
  }

 private:
  std::map<double, std::vector<Event>> buckets_;
  std::vector<std::vector<Event>> spare_;
  // The bucket pushed to last: most pushes in a row share a time.
  std::map<double, std::vector<Event>>::iterator last_;
  bool has_last_ = false;
};

}  // namespace tensorplay::schedules::detail
