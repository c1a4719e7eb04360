// pipe_split() forwards to the active recorder.
#include "stages/pipe_split.h"

#include "tensors/trace_hook.h"

namespace tensorplay::pipelining {

void pipe_split() {
  if (trace::OpRecorder* r = trace::active_recorder()) r->record_split();
}

}  // namespace tensorplay::pipelining
