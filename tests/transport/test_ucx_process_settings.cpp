// Tests for ucx_process_settings.h: the settings tp-launch makes through the environment take
// effect when the program makes them, after UCX's libraries read their environment.
#include <catch2/catch.hpp>

#include "tensorplay/transport/ucx_process_settings.h"

namespace tp = tensorplay::transport;

TEST_CASE("UCX's debugging file system and memory events turned off by the program",
          "[ucx_settings]") {
  tp::apply_ucx_settings({{"UCX_VFS_ENABLE", "y"}, {"UCX_MEM_EVENTS", "yes"}});
  CHECK(tp::ucx_vfs_enabled());
  CHECK(tp::ucx_mem_events_enabled());
  tp::apply_ucx_settings({{"UCX_VFS_ENABLE", "n"}, {"UCX_MEM_EVENTS", "no"}});
  CHECK_FALSE(tp::ucx_vfs_enabled());
  CHECK_FALSE(tp::ucx_mem_events_enabled());
  CHECK_THROWS_WITH(tp::apply_ucx_settings({{"UCX_TLS", "tcp"}}),
                    Catch::Contains("UCX_TLS is not a setting it knows"));
}
