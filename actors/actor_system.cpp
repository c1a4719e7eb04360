// The process-wide CAF actor system.
#include <mutex>

#include "actors/detail/caf_system.h"

namespace tensorplay::pipelining::detail {

caf::actor_system& process_actor_system() {
  static std::once_flag once;
  static caf::actor_system_config* config = nullptr;
  static caf::actor_system* system = nullptr;
  std::call_once(once, [] {
    config = new caf::actor_system_config();
    config->set("scheduler.max-threads", size_t{2});
    // Work stealing spins when idle; sharing sleeps, which matters on small machines.
    config->set("scheduler.policy", caf::atom("sharing"));
    // Never destroyed: CAF 0.17's actor_system destructor crashes when it runs after main
    // returns (from a static destructor or atexit), because CAF's own statics are gone by then.
    // Schedules stop and join their actors in their destructors, so at exit only the idle
    // scheduler threads remain, and the process ends them.
    system = new caf::actor_system(*config);
  });
  return *system;
}

}  // namespace tensorplay::pipelining::detail
