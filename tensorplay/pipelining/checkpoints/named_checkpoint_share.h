// Layout-free checkpoints loaded by data-parallel replicas together: which replica reads which
// entry, the agreement that makes every replica fail alike, and the exchange of what each read.
#pragma once

#include <string>
#include <unordered_map>
#include <vector>

#include "tensorplay/pipelining/checkpoints/named_step_reader.h"
#include "tensorplay/pipelining/checkpoints/replica_exchange.h"

namespace tensorplay::pipelining {

/// The replica (0 to `replicas` - 1) that reads each of `entries`: the same on every replica
/// that passes the same entries in any order. Largest first (ties by kind, name and key), each to
/// the replica with the fewest bytes so far (ties: the lowest index), so shares balance by bytes.
std::vector<int> deal_by_bytes(const std::vector<const StepReader::Located*>& entries,
                               int replicas);

/// A digest of the entries' kinds, names, keys and sizes, in order (replicas compare theirs).
std::string entries_digest(const std::vector<const StepReader::Located*>& entries);

/// Every replica passes what went wrong in its part (empty: nothing) and, when nothing did, what
/// it chose (a step, a digest of what it needs). Returns when every replica succeeded with the
/// same choice; else throws, on every replica, the same CheckpointError: the lowest failed
/// replica's message, or one saying the replicas chose differently (naming `what`).
void agree_among_replicas(ReplicaExchange& replicas, const std::string& error,
                          const std::string& choice, const std::string& what);

/// Reads this replica's share of `entries` (`owner[i]` == replicas.rank()), in order.
std::vector<Tensor> read_share(StepReader& reader,
                               const std::vector<const StepReader::Located*>& entries,
                               const std::vector<int>& owner, int me);

/// Every replica's share gathered (all_gather_tensors), by entry: each entry's tensor as its
/// owner read it. Throws CheckpointError when a share does not match its entries' shapes.
std::unordered_map<const IndexEntry*, Tensor> gather_shares(
    ReplicaExchange& replicas, const std::vector<const StepReader::Located*>& entries,
    const std::vector<int>& owner, std::vector<Tensor> mine);

}  // namespace tensorplay::pipelining
