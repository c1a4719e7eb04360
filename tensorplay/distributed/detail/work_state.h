// What a Work waits on (private to distributed/): the members whose data is still to come, the
// errors of those that failed, and the step that finishes the collective once all arrived.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <string>

#include "tensorplay/distributed/work.h"

namespace tensorplay::distributed {

struct Work::State {
  std::mutex mutex;
  std::condition_variable cv;
  /// Members (group rank -> "rank R (host H)") whose data has not arrived yet.
  std::map<int, std::string> waiting;
  /// The first transfer error, with the member it came from.
  std::string error;
  std::chrono::steady_clock::time_point deadline;
  std::chrono::milliseconds timeout{0};
  /// "all_gather_into_tensor on group [0, 1]" for messages.
  std::string where;
  /// Runs once on the waiting thread after every member's data arrived (sums, copies back).
  std::function<void()> finish;
  bool finished = false;
  std::string finish_error;

  /// Member `member`'s data arrived (`error` empty) or failed.
  void arrived(int member, const std::string& error_text) {
    {
      std::lock_guard lock(mutex);
      if (!error_text.empty() && error.empty())
        error = waiting.count(member) ? waiting[member] + ": " + error_text : error_text;
      waiting.erase(member);
    }
    cv.notify_all();
  }
};

}  // namespace tensorplay::distributed
