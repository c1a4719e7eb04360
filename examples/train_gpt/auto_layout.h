// train_gpt's --pp and --dp: the pipeline and data-parallel degrees from the world size when
// either is "auto", and the layout in words for checkpoints and the resume line.
#pragma once

#include <string>

#include "options.h"

namespace train_gpt {

/// Sets o.stages and o.dp from --pp/--dp for a world of `world` processes (1: the embedded
/// runtime) and a schedule of `stages_per_rank` stages per rank. --pp N sets stages to N x
/// stages_per_rank; --dp auto takes the world size over pp, or, with --pp auto too, the largest
/// dp dividing the world size whose replicas split the batch into whole microbatches, leave each
/// stage a block, and whose ranks hold their share of `model_bytes` (parameters, gradients and
/// optimizer state) within `memory_per_rank` (0: no limit); --pp auto with a fixed dp takes the
/// world size over dp. Without tp-launch the world is one process: the embedded runtime runs
/// every rank, and --pp auto keeps --stages. Throws std::invalid_argument saying what does not
/// divide or fit and what to change.
void resolve_layout(Options& o, int world, int stages_per_rank, double model_bytes = 0,
                    double memory_per_rank = 0);

/// Bytes a GPT of `o`'s sizes over `vocab` characters needs for its float32 parameters, their
/// gradients and AdamW's two moments (16 bytes a parameter; activations not counted).
double gpt_training_bytes(const Options& o, int64_t vocab);

/// Memory this process may use: MemAvailable of /proc/meminfo over the ranks of this host
/// (0 when it cannot be read).
double host_memory_per_rank(int local_ranks);

/// "pp 2 x dp 1": pipeline ranks and replicas.
std::string layout_text(const Options& o, int stages_per_rank);

}  // namespace train_gpt
