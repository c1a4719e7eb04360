// train_gpt's --pp and --dp: the pipeline and data-parallel degrees from the world size when
// either is "auto", and the layout in words for checkpoints and the resume line.
#pragma once

#include <string>

#include "options.h"

namespace train_gpt {

/// Sets o.stages and o.dp from --pp/--dp for a world of `world` processes (1: the embedded
/// runtime) and a schedule of `stages_per_rank` stages per rank. --pp N sets stages to N x
/// stages_per_rank; --dp auto takes the world size over pp, or, with --pp auto too, the largest
/// dp dividing the world size whose replicas split the batch into whole microbatches and leave
/// each stage a block; --pp auto with a fixed dp takes the world size over dp. Without tp-launch
/// the world is one process: the embedded runtime runs every rank, and --pp auto keeps --stages.
/// Throws std::invalid_argument saying what does not divide and what to change.
void resolve_layout(Options& o, int world, int stages_per_rank);

/// "pp 2 x dp 1": pipeline ranks and replicas.
std::string layout_text(const Options& o, int stages_per_rank);

}  // namespace train_gpt
