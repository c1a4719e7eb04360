// One rank of a hand-started job for the rendezvous checks: joins with init_process_group (bounded
// by TENSORPLAY_RDZV_TIMEOUT, or by --timeout-ms when given) and prints how the rendezvous ended
// and after how many milliseconds. Exits 0 when it joined, 1 when it failed. Usage: rendezvous_rank
// [--timeout-ms MS]     (its place comes from RANK, WORLD_SIZE, ...)
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>

#include "tensorplay/distributed/launch_env.h"
#include "tensorplay/distributed/process_group.h"

namespace dist = tensorplay::distributed;

namespace {

long long elapsed_ms(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                               since)
      .count();
}

}  // namespace

int main(int argc, char** argv) {
  const auto started = std::chrono::steady_clock::now();
  dist::InitOptions options;
  options.backend = "ucx";
  if (argc == 3 && std::strcmp(argv[1], "--timeout-ms") == 0)
    options.timeout = std::chrono::milliseconds(std::atoll(argv[2]));
  std::string rank = "?";
  try {
    rank = std::to_string(dist::read_launch_env().rank);
  } catch (const std::exception&) {
    // A bad variable: init_process_group below says which.
  }
  try {
    dist::init_process_group(options);
    std::printf("rendezvous rank %s: joined after %lld ms\n", rank.c_str(), elapsed_ms(started));
    std::fflush(stdout);
    dist::destroy_process_group();
    return 0;
  } catch (const std::exception& e) {
    std::printf("rendezvous rank %s: failed after %lld ms: %s\n", rank.c_str(), elapsed_ms(started),
                e.what());
    std::fflush(stdout);
    return 1;
  }
}
