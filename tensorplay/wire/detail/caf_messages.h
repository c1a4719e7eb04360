// CAF atoms and message types of the runtime's protocol. Private (wire/detail/): no public header
// sees CAF. Messages that cross processes hold values only (no pointers); every type in
// them is registered with the actor system (caf_system.cpp).
#pragma once

#include <atomic>
#include <caf/all.hpp>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tensorplay/transport/tensor_descriptor.h"
#include "tensorplay/wire/notification.h"
#include "tensorplay/wire/pipeline_tag.h"

namespace tensorplay::transport {

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, TensorDescriptor& x) {
  return f(caf::meta::type_name("TensorDescriptor"), x.shape, x.dtype, x.bytes, x.defined);
}

}  // namespace tensorplay::transport

namespace tensorplay::pipelining {

/// A notification crosses processes as itself (the stage actors' one message for it).
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, Notification& x) {
  return f(caf::meta::type_name("Notification"), x.step, x.stage, x.direction, x.microbatch,
           x.source, x.tensors);
}

}  // namespace tensorplay::pipelining

namespace tensorplay::pipelining::detail {

// Between stage actors (may cross processes); a Notification travels as itself.
using peer_failed_atom = caf::atom_constant<caf::atom("pfailed")>;  // a rank's step failed
using status_atom = caf::atom_constant<caf::atom("status")>;        // what a rank does in step N

// Driver <-> its local stage actor (never leave the process).
using step_atom = caf::atom_constant<caf::atom("step")>;           // begin a step
using done_atom = caf::atom_constant<caf::atom("done")>;           // ranks finished
using failed_atom = caf::atom_constant<caf::atom("failed")>;       // step failed
using abort_atom = caf::atom_constant<caf::atom("abort")>;         // drop the step
using peers_atom = caf::atom_constant<caf::atom("peers")>;         // stage actors by rank
using resume_atom = caf::atom_constant<caf::atom("resume")>;       // run more ready actions
using check_gone_atom = caf::atom_constant<caf::atom("chkgone")>;  // does the step need a gone rank
using rejected_atom = caf::atom_constant<caf::atom("rejected")>;   // the worker kept rejections

// Process actors (distributed/process_actor.cpp).
using hello_atom = caf::atom_constant<caf::atom("hello")>;         // rank -> rank 0: joining
using ping_atom = caf::atom_constant<caf::atom("ping")>;           // rank 0 -> rank: clock sample
using collective_atom = caf::atom_constant<caf::atom("coll")>;     // one member's contribution
using dp_failed_atom = caf::atom_constant<caf::atom("dpfailed")>;  // a replica's step failed

/// A posted receive completed: the tensors of `tag` are here (or will not come: the worker knows
/// why). From the channel's thread to this process's stage actor only.
struct TensorsArrived {
  PipelineTag tag;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, TensorsArrived& x) {
  return f(caf::meta::type_name("TensorsArrived"), x.tag.step, x.tag.stage, x.tag.direction,
           x.tag.microbatch);
}

/// The rendezvous protocol's version: rank 0 refuses a hello of another version.
constexpr int32_t kRendezvousProtocol = 4;

/// What a rank says when it joins (to rank 0) and what rank 0 answers (every rank's entry). Rank
/// 0 answers a hello with (table, why): every rank's entry and "" once all joined, or no entry
/// and why the rendezvous ended (a refusal, a timeout) at once.
struct PeerEntry {
  int32_t protocol = kRendezvousProtocol;
  int32_t rank = 0;
  int32_t world_size = 0;
  std::string host;             ///< where its process actor is published
  std::string machine;          ///< the machine it runs on (boot id and host name)
  uint16_t port = 0;            ///< its port (rank 0: MASTER_PORT)
  std::string ucx;              ///< UCX worker address bytes
  std::string token;            ///< the cluster token it presented (TENSORPLAY_CLUSTER_TOKEN)
  std::string job;              ///< its launcher's job id (LaunchEnv::job_id; empty: none)
  int64_t clock_offset_us = 0;  ///< add to its steady clock to read rank 0's (set by rank 0)
  caf::actor actor;             ///< its process actor
  int64_t timeout_ms = 0;       ///< its rendezvous timeout
  int64_t wait_ms = 0;          ///< how long it still waits for the table (from its hello)
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, PeerEntry& x) {
  return f(caf::meta::type_name("PeerEntry"), x.protocol, x.rank, x.world_size, x.host, x.machine,
           x.port, x.ucx, x.token, x.job, x.clock_offset_us, x.actor, x.timeout_ms, x.wait_ms);
}

/// One member's part of a collective on a group: `key` names the group and the call.
struct Contribution {
  uint64_t key = 0;
  int32_t source = 0;  ///< global rank
  std::string bytes;
  std::vector<caf::actor> actors;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, Contribution& x) {
  return f(caf::meta::type_name("Contribution"), x.key, x.source, x.bytes, x.actors);
}

}  // namespace tensorplay::pipelining::detail
