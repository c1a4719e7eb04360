// The process-wide CAF actor system, with the middleman (CAF's network layer) loaded and the
// protocol's message types registered, so the same system serves embedded and multi-process runs.
#include "tensorplay/wire/detail/caf_system.h"

#include <algorithm>
#include <caf/io/all.hpp>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>

#include "tensorplay/base/knobs.h"
#include "tensorplay/wire/detail/caf_messages.h"
#include "tensorplay/wire/wire_knobs.h"

namespace tensorplay::pipelining::detail {

std::chrono::milliseconds peer_timeout_from_env() {
  const double seconds = knob_double(kPeerTimeoutKnob);
  return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
}

std::unique_ptr<caf::actor_system_config> make_actor_system_config() {
  auto config = std::make_unique<caf::actor_system_config>();
  config->set("scheduler.max-threads", size_t{2});
  // Work stealing spins when idle; sharing sleeps, which matters on small machines.
  config->set("scheduler.policy", caf::atom("sharing"));
  // Heartbeats are off by default in CAF 0.17: a dead peer would be noticed only when TCP
  // notices (a killed process's connection closes at once; a host that vanishes, a cut
  // network or a stopped process do not close it). A connection silent for
  // TENSORPLAY_PEER_TIMEOUT seconds (default 10) is dropped, with heartbeats five times as often
  // (at most 1 s apart).
  const auto peer_timeout = peer_timeout_from_env();
  config->set("middleman.heartbeat-interval", caf::timespan{std::min<std::chrono::nanoseconds>(
                                                  peer_timeout / 5, std::chrono::seconds(1))});
  config->set("middleman.connection-timeout", caf::timespan{peer_timeout});
  config->load<caf::io::middleman>();
  config->add_message_type<transport::TensorDescriptor>("TensorDescriptor");
  config->add_message_type<std::vector<transport::TensorDescriptor>>("TensorDescriptors");
  config->add_message_type<Notification>("Notification");
  config->add_message_type<TensorsArrived>("TensorsArrived");
  config->add_message_type<PeerEntry>("PeerEntry");
  config->add_message_type<std::vector<PeerEntry>>("PeerEntries");
  config->add_message_type<Contribution>("Contribution");
  return config;
}

caf::actor_system& process_actor_system() {
  static std::once_flag once;
  static caf::actor_system* system = nullptr;
  std::call_once(once, [] {
    // Never destroyed: CAF 0.17's actor_system destructor crashes when it runs after main
    // returns (from a static destructor or atexit), because CAF's own statics are gone by then.
    // Schedules stop and join their actors in their destructors, so at exit only the idle
    // scheduler threads remain, and the process ends them.
    system = new caf::actor_system(*make_actor_system_config().release());
  });
  return *system;
}

}  // namespace tensorplay::pipelining::detail
