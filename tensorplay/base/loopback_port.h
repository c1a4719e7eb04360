// A free loopback port for a job's rendezvous, where other programs' connections cannot take it.
// In the lowest layer so that tp-launch (which links only base/) and the runtime share it.
#pragma once

namespace tensorplay::inline base {

/// A loopback TCP port that was free a moment ago, for a rendezvous that binds it next. It lies
/// below the kernel's ephemeral range (/proc/sys/net/ipv4/ip_local_port_range): the ports the
/// kernel gives to `bind(0)` and to outgoing connections come from that range, so other
/// processes' connections cannot take the port between its choice and its bind; a second chooser
/// at the same moment is the remaining, rare, race (as with torchrun). Throws std::runtime_error
/// naming the range searched when no port in it can be bound.
int free_loopback_port();

}  // namespace tensorplay::inline base
