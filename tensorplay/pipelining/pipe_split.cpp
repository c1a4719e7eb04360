// pipe_split() forwards to the active recorder.
#include "tensorplay/pipelining/pipe_split.h"

#include "tensorplay/core/trace_hook.h"

namespace tensorplay::pipelining {

void pipe_split() {
  if (trace::OpRecorder* r = trace::active_recorder()) r->record_split();
}

}  // namespace tensorplay::pipelining
