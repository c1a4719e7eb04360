// ReplicaExchange: how the data-parallel replicas of a stage share work, seen from pipelining/ (no
// process groups here): who they are and collectives over them.
// pipelining/runtime/group_replica_exchange.h makes one from a group.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "tensorplay/core/tensor.h"

namespace tensorplay::pipelining {

/// The replicas of a data-parallel group, as code in this layer sees them (a layout-free
/// checkpoint's load splits its reading among them). Every method but size() and rank() is a
/// collective: every replica calls it, at the same point of its sequence of calls. A replica that
/// fails or does not take part within the implementation's timeout makes the others throw
/// (never wait forever).
class ReplicaExchange {
 public:
  virtual ~ReplicaExchange() = default;
  /// Number of replicas (at least 1).
  virtual int size() const = 0;
  /// This replica's index, 0 to size() - 1.
  virtual int rank() const = 0;
  /// Every replica's `bytes`, by replica index, exactly as given.
  virtual std::vector<std::string> all_gather(const std::string& bytes) = 0;
  /// Every replica's `mine` (host tensors, any shapes and dtypes), by replica index, bit for bit
  /// as given (entry rank() is `mine` itself). The default sends the tensors' bytes through
  /// all_gather in pieces of at most piece_bytes(); implementations may move them more directly.
  virtual std::vector<std::vector<Tensor>> all_gather_tensors(const std::vector<Tensor>& mine);

  /// The most bytes the default all_gather_tensors hands all_gather in one call.
  virtual size_t piece_bytes() const { return kPieceBytes; }
  static constexpr size_t kPieceBytes = size_t{64} << 20;
};

}  // namespace tensorplay::pipelining
