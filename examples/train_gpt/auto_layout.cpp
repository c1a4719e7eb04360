// train_gpt's automatic pipeline and data-parallel degrees.
#include "auto_layout.h"

#include <algorithm>
#include <fstream>
#include <stdexcept>
#include <string>

namespace train_gpt {
namespace {

// Whether dp replicas of a pipeline of `pp` ranks fit: the batch splits into dp x microbatches
// whole microbatches and every stage keeps at least one block.
bool fits(const Options& o, int pp, int dp, int stages_per_rank, double model_bytes,
          double memory_per_rank) {
  return o.batch % (static_cast<int64_t>(o.n_microbatches) * dp) == 0 &&
         static_cast<int64_t>(pp) * stages_per_rank <= o.layers &&
         (memory_per_rank <= 0 || model_bytes / pp <= memory_per_rank);
}

}  // namespace

void resolve_layout(Options& o, int world, int stages_per_rank, double model_bytes,
                    double memory_per_rank) {
  const auto set_stages = [&](int pp, const std::string& from) {
    o.stages = pp * stages_per_rank;
    o.stages_from =
        from + " x " + std::to_string(stages_per_rank) + " stages per rank of " + o.schedule;
  };
  if (world == 1) {  // the embedded runtime: one process runs every rank of one replica
    if (o.pp > 0) set_stages(o.pp, "--pp " + std::to_string(o.pp));
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
      if (world % dp == 0 && fits(o, world / dp, dp, stages_per_rank, model_bytes, memory_per_rank))
        o.dp = dp;
    if (o.dp == 0)
      throw std::invalid_argument(
          "--pp auto --dp auto: no split of " + std::to_string(world) +
          " processes fits: dp must divide --batch " + std::to_string(o.batch) +
          " into --microbatches " + std::to_string(o.n_microbatches) +
          " per replica, pp x stages per rank must not pass --layers " + std::to_string(o.layers) +
          ", and a rank holds 1/pp of the model's " +
          std::to_string(static_cast<long long>(model_bytes / (1 << 20))) +
          " MiB of training state" +
          (memory_per_rank > 0
               ? " in " + std::to_string(static_cast<long long>(memory_per_rank / (1 << 20))) +
                     " MiB"
               : std::string()) +
          ": change --batch, --microbatches or the model's size, or give the job more processes");
    pp = world / o.dp;
  } else if (o.pp_auto) {
    if (world % o.dp != 0)
      throw std::invalid_argument("--dp " + std::to_string(o.dp) + " does not divide the " +
                                  std::to_string(world) + " processes: pass --dp auto");
    pp = world / o.dp;
  }
  if (pp > 0 && !o.pp_auto && static_cast<int64_t>(pp) * o.dp != world)
    throw std::invalid_argument(
        "--pp " + std::to_string(pp) +
        (o.dp > 1 ? " x --dp " + std::to_string(o.dp) : std::string()) + " needs " +
        std::to_string(static_cast<int64_t>(pp) * o.dp) + " processes, but tp-launch started " +
        std::to_string(world) +
        ": start that many (tp-launch --nproc-per-node), or pass --pp auto");
  if (pp > 0)
    set_stages(pp, o.pp_auto || o.pp == 0
                       ? "--pp auto (" + std::to_string(world) + " processes / dp " +
                             std::to_string(o.dp) + " = " + std::to_string(pp) + ")"
                       : "--pp " + std::to_string(pp));
}

double gpt_training_bytes(const Options& o, int64_t vocab) {
  const double w = static_cast<double>(o.width);
  const double parameters = static_cast<double>(vocab + o.context) * w +
                            static_cast<double>(o.layers) * (12 * w * w + 13 * w) + 2 * w;
  return 16 * parameters;
}

double host_memory_per_rank(int local_ranks) {
  std::ifstream meminfo("/proc/meminfo");
  std::string key, unit;
  double kib = 0;
  while (meminfo >> key >> kib >> unit)
    if (key == "MemAvailable:") return kib * 1024 / std::max(1, local_ranks);
  return 0;
}

std::string layout_text(const Options& o, int stages_per_rank) {
  return "pp " + std::to_string(o.stages / stages_per_rank) + " x dp " + std::to_string(o.dp);
}

}  // namespace train_gpt
