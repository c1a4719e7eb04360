// One rank that joins the process group (so UCX is loaded, with its signal handlers, and its
// worker runs) and then waits, for tp-launch's signal checks. Prints "idle rank R: ready, pid P"
// once joined; exits 0 after 60 s unless stopped, 1 when it cannot join.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <exception>
#include <thread>

#include "tensorplay/distributed/process_group.h"

namespace dist = tensorplay::distributed;

int main() {
  try {
    dist::init_process_group({.timeout = std::chrono::seconds(30)});
    std::printf("idle rank %d: ready, pid %d\n", dist::get_rank(), static_cast<int>(::getpid()));
    std::fflush(stdout);
    std::this_thread::sleep_for(std::chrono::seconds(60));
    dist::destroy_process_group();
    return 0;
  } catch (const std::exception& e) {
    std::printf("idle rank: cannot join: %s\n", e.what());
    return 1;
  }
}
