// The process-wide CAF actor system, with the middleman (CAF's network layer) loaded and the
// protocol's message types registered, so the same system serves embedded and multi-process runs.
#include <caf/io/all.hpp>
#include <mutex>

#include "actors/detail/caf_messages.h"
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
    // Heartbeats are off by default in CAF 0.17: a dead peer would be noticed only when TCP
    // notices. One a second, and a connection silent for 10 s is dropped.
    config->set("middleman.heartbeat-interval", caf::timespan{std::chrono::seconds(1)});
    config->set("middleman.connection-timeout", caf::timespan{std::chrono::seconds(10)});
    config->load<caf::io::middleman>();
    config->add_message_type<transport::TensorDescriptor>("TensorDescriptor");
    config->add_message_type<std::vector<transport::TensorDescriptor>>("TensorDescriptors");
    config->add_message_type<WireNote>("WireNote");
    config->add_message_type<PeerEntry>("PeerEntry");
    config->add_message_type<std::vector<PeerEntry>>("PeerEntries");
    config->add_message_type<Contribution>("Contribution");
    // Never destroyed: CAF 0.17's actor_system destructor crashes when it runs after main
    // returns (from a static destructor or atexit), because CAF's own statics are gone by then.
    // Schedules stop and join their actors in their destructors, so at exit only the idle
    // scheduler threads remain, and the process ends them.
    system = new caf::actor_system(*config);
  });
  return *system;
}

}  // namespace tensorplay::pipelining::detail
