// train_gpt's automatic pipeline and data-parallel degrees.
#include "auto_layout.h"

#include <stdexcept>

namespace train_gpt {
namespace {

// Whether dp replicas of a pipeline of `pp` ranks fit: the batch splits into dp x microbatches
// whole microbatches and every stage keeps at least one block.
bool fits(const Options& o, int pp, int dp, int stages_per_rank) {
  return o.batch % (static_cast<int64_t>(o.microbatches) * dp) == 0 &&
         static_cast<int64_t>(pp) * stages_per_rank <= o.layers;
}

}  // namespace

void resolve_layout(Options& o, int world, int stages_per_rank) {
  if (world == 1) {  // the embedded runtime: one process runs every rank of one replica
    if (o.pp > 0) o.stages = o.pp * stages_per_rank;
    if (o.dp_auto) o.dp = 1;
    return;
  }
  int pp = o.pp;
  if (o.dp_auto && pp > 0) {
    if (world % pp != 0)
      throw std::invalid_argument("--pp " + std::to_string(pp) + " does not divide the " +
                                  std::to_string(world) + " processes: pass --pp auto");
    o.dp = world / pp;
  } else if (o.dp_auto) {  // both auto: the largest dp that fits
    o.dp = 0;
    for (int dp = world; dp >= 1 && o.dp == 0; --dp)
      if (world % dp == 0 && fits(o, world / dp, dp, stages_per_rank)) o.dp = dp;
    if (o.dp == 0)
      throw std::invalid_argument("--pp auto --dp auto: no split of " + std::to_string(world) +
                                  " processes fits --batch " + std::to_string(o.batch) +
                                  " and --layers " + std::to_string(o.layers) +
                                  ": raise --batch or --layers");
    pp = world / o.dp;
  } else if (o.pp_auto) {
    if (world % o.dp != 0)
      throw std::invalid_argument("--dp " + std::to_string(o.dp) + " does not divide the " +
                                  std::to_string(world) + " processes: pass --dp auto");
    pp = world / o.dp;
  }
  if (pp > 0) o.stages = pp * stages_per_rank;
}

std::string layout_text(const Options& o, int stages_per_rank) {
  return "pp " + std::to_string(o.stages / stages_per_rank) + " x dp " + std::to_string(o.dp);
}

}  // namespace train_gpt
