// PipeDigest: what a Pipe was built as (its traced graph, its cuts, what each stage receives,
// sends and holds), as text that ranks exchange, a hash to compare cheaply, and in words.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tensorplay/pipelining/tensor_meta.h"

namespace tensorplay::pipelining {

struct Graph;
class StageModule;

/// A comparable description of a split model. Two ranks whose digests are equal built the same
/// graph, cut at the same nodes, with the same values crossing each boundary and the same
/// parameters (names, shapes, dtypes) in each stage.
struct PipeDigest {
  /// The graph's inputs ("arg0 float32[2,16]").
  std::vector<std::string> inputs;
  /// One line per traced node: "%3 = linear(%2, layers.1.lin.weight, layers.1.lin.bias)
  /// float32[2,16] @layers.1.lin".
  std::vector<std::string> nodes;
  /// Per cut, the node the next stage begins with, and what begins there: the outermost module
  /// starting at that node ("layers.1"), else the node ("node 7 (tanh in layers.0)").
  struct Cut {
    int node = 0;
    std::string before;
    bool operator==(const Cut&) const = default;
  };
  std::vector<Cut> cuts;
  /// Per stage: the values it receives and sends ("tanh_3 float32[2,16]"), and the parameters
  /// and buffers it holds ("layers.0.lin.weight float32[16,16]").
  struct Stage {
    std::vector<std::string> receives, sends, holds;
    bool operator==(const Stage&) const = default;
  };
  std::vector<Stage> stages;

  bool operator==(const PipeDigest&) const = default;
  /// The digest as lines of text (what ranks exchange when hashes differ).
  std::string encode() const;
  /// Reads encode()'s text; throws std::invalid_argument when it is not one.
  static PipeDigest decode(std::string_view text);
  /// A 64-bit hash of encode()'s text (equal digests, equal hashes).
  uint64_t hash() const;
};

/// The digest of a Pipe: its traced graph `g`, its `cuts` and its stages' modules, in order.
PipeDigest digest_of(const Graph& g, const std::vector<int>& cuts,
                     const std::vector<const StageModule*>& stages);

/// FNV-1a, 64 bits, of `bytes` (to compare texts cheaply; not against an adversary).
uint64_t digest_hash(std::string_view bytes);

/// The first cut where `a` (built on `a_rank`, e.g. "rank 0") and `b` differ, in words ("rank 0
/// cuts before layers.1, rank 1 before layers.2"); empty when the cuts agree.
std::string cut_difference(const PipeDigest& a, const std::string& a_rank, const PipeDigest& b,
                           const std::string& b_rank);

/// The first difference between `a` and `b`, in words naming both ranks: the cuts, then what
/// each stage receives and sends, then the parameters each stage holds, then the graph's inputs
/// and nodes. Empty when the digests are equal.
std::string first_difference(const PipeDigest& a, const std::string& a_rank, const PipeDigest& b,
                             const std::string& b_rank);

}  // namespace tensorplay::pipelining
