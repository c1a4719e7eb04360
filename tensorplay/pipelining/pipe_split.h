// pipe_split(): the marker a model's forward calls to say "cut the pipeline here" when traced by
// pipeline(); outside a trace it does nothing.
#pragma once

namespace tensorplay::pipelining {

/// Marks a stage boundary at this point of the forward: every op recorded before the call goes
/// to the earlier stage, every op after it to the next one. A no-op when not tracing, so the
/// model runs unchanged on its own.
void pipe_split();

}  // namespace tensorplay::pipelining
