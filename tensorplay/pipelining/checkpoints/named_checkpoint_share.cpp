// Layout-free checkpoints loaded by replicas together: the deal, the agreement, the exchange.
#include "tensorplay/pipelining/checkpoints/named_checkpoint_share.h"

#include <algorithm>
#include <numeric>
#include <tuple>

#include "tensorplay/pipelining/checkpoints/checkpoint.h"
#include "tensorplay/pipelining/checkpoints/checkpoint_io.h"

namespace tensorplay::pipelining {

using Located = StepReader::Located;

std::vector<int> deal_by_bytes(const std::vector<const Located*>& entries, int replicas) {
  std::vector<size_t> order(entries.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const IndexEntry& x = *entries[a]->entry;
    const IndexEntry& y = *entries[b]->entry;
    if (x.bytes != y.bytes) return x.bytes > y.bytes;
    return std::tie(x.kind, x.name, x.key) < std::tie(y.kind, y.name, y.key);
  });
  std::vector<uint64_t> load(std::max(replicas, 1), 0);
  std::vector<int> owner(entries.size(), 0);
  for (size_t i : order) {
    const int r = static_cast<int>(std::min_element(load.begin(), load.end()) - load.begin());
    owner[i] = r;
    load[r] += entries[i]->entry->bytes;
  }
  return owner;
}

std::string entries_digest(const std::vector<const Located*>& entries) {
  std::string fields;  // each field followed by a byte no field holds
  for (const Located* at : entries) {
    const IndexEntry& e = *at->entry;
    for (const std::string& field :
         {std::to_string(static_cast<int>(e.kind)), e.name, e.key, std::to_string(e.bytes)}) {
      fields += field;
      fields += '\xff';
    }
  }
  return std::to_string(entries.size()) + " tensors, digest " +
         std::to_string(checkpoint_io::fnv1a64(fields));
}

void agree_among_replicas(ReplicaExchange& replicas, const std::string& error,
                          const std::string& choice, const std::string& what) {
  const std::vector<std::string> all =
      replicas.all_gather(error.empty() ? "+" + choice : "!" + error);
  const std::string n = std::to_string(all.size());
  for (size_t r = 0; r < all.size(); ++r)
    if (all[r].empty() || all[r][0] != '+')
      throw CheckpointError(all[r].substr(std::min<size_t>(1, all[r].size())) +
                            " (found by data-parallel replica " + std::to_string(r) + " of " + n +
                            ")");
  for (size_t r = 1; r < all.size(); ++r)
    if (all[r] != all[0])
      throw CheckpointError("checkpoint: the data-parallel replicas differ in " + what +
                            ": replica 0 has " + all[0].substr(1) + ", replica " +
                            std::to_string(r) + " " + all[r].substr(1) +
                            " (replicas must hold the same stages and see the same files)");
}

std::vector<Tensor> read_share(StepReader& reader, const std::vector<const Located*>& entries,
                               const std::vector<int>& owner, int me) {
  std::vector<Tensor> mine;
  for (size_t i = 0; i < entries.size(); ++i)
    if (owner[i] == me) mine.push_back(reader.read(*entries[i]));
  return mine;
}

std::unordered_map<const IndexEntry*, Tensor> gather_shares(
    ReplicaExchange& replicas, const std::vector<const Located*>& entries,
    const std::vector<int>& owner, std::vector<Tensor> mine) {
  std::vector<std::vector<Tensor>> all = replicas.all_gather_tensors(mine);
  std::vector<size_t> next(all.size(), 0);
  std::unordered_map<const IndexEntry*, Tensor> out;
  for (size_t i = 0; i < entries.size(); ++i) {
    const IndexEntry& e = *entries[i]->entry;
    const size_t r = static_cast<size_t>(owner[i]);
    if (r >= all.size() || next[r] >= all[r].size() || all[r][next[r]].nbytes() != e.bytes ||
        all[r][next[r]].shape() != e.shape)
      throw CheckpointError("checkpoint: data-parallel replica " + std::to_string(r) +
                            " sent no tensor of the shape of '" + e.name +
                            "' (replicas must hold the same stages)");
    out.emplace(&e, std::move(all[r][next[r]++]));
  }
  return out;
}

}  // namespace tensorplay::pipelining
