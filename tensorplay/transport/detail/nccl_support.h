// NCCL helpers shared by the NCCL channel and the NCCL all-reduce (private to transport/, built
// only with NCCL): error text, waiting on nonblocking communicators, deadlines.
#pragma once

#include <nccl.h>

#include <chrono>
#include <cstring>
#include <string>
#include <thread>

#include "tensorplay/transport/channel.h"

namespace tensorplay::transport::detail {

using Clock = std::chrono::steady_clock;

inline std::string nccl_message(ncclResult_t result) {
  std::string text = ncclGetErrorString(result);
  const char* last = ncclGetLastError(nullptr);
  if (last != nullptr && *last != '\0') text += std::string(": ") + last;
  if (last != nullptr && std::strstr(last, "Duplicate GPU") != nullptr)
    text += " (NCCL needs a different GPU for every rank of a group)";
  return text;
}

// Waits until a nonblocking communicator's last call has finished its host-side work. Returns its
// state: ncclSuccess, an error, or ncclInProgress when `deadline` came first.
inline ncclResult_t wait_ready(ncclComm_t comm, Clock::time_point deadline) {
  while (true) {
    ncclResult_t state = ncclSuccess;
    ncclResult_t result = ncclCommGetAsyncError(comm, &state);
    if (result != ncclSuccess) return result;
    if (state != ncclInProgress) return state;
    if (Clock::now() >= deadline) return ncclInProgress;
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

// Completes a call on a nonblocking communicator: waits out ncclInProgress, throws on errors.
inline void finish(ncclResult_t result, ncclComm_t comm, Clock::time_point deadline,
                   const std::string& what) {
  if (result == ncclInProgress) result = wait_ready(comm, deadline);
  if (result == ncclInProgress) throw TransferError("nccl: " + what + " did not finish in time");
  if (result != ncclSuccess)
    throw TransferError("nccl: " + what + " failed: " + nccl_message(result));
}

// Deadlines far in the future (a timeout of "forever") must not overflow the clock.
inline Clock::time_point deadline_after(std::chrono::milliseconds timeout) {
  if (timeout >= std::chrono::hours(24 * 365)) return Clock::time_point::max();
  return Clock::now() + timeout;
}

}  // namespace tensorplay::transport::detail
