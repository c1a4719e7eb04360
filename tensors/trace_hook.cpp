// Thread-local recorder and module path for tracing.
#include "tensors/trace_hook.h"

namespace tensorplay::trace {
namespace {
thread_local OpRecorder* recorder = nullptr;
thread_local std::string module_path;
}  // namespace

OpRecorder* active_recorder() { return recorder; }

OpRecorder* set_active_recorder(OpRecorder* r) {
  OpRecorder* previous = recorder;
  recorder = r;
  return previous;
}

Tensor record(const char* op, const std::vector<Tensor>& inputs, const Tensor& output,
              ReplayFn replay) {
  if (recorder) recorder->record_op(op, inputs, output, std::move(replay));
  return output;
}

const std::string& current_module_path() { return module_path; }

ModulePathScope::ModulePathScope(const std::string& name)
    : previous_length_(module_path.size()), pushed_(!name.empty()) {
  if (!pushed_) return;
  if (!module_path.empty()) module_path += '.';
  module_path += name;
  if (recorder) recorder->enter_module(module_path);
}

ModulePathScope::~ModulePathScope() {
  if (!pushed_) return;
  if (recorder) recorder->exit_module(module_path);
  module_path.resize(previous_length_);
}

}  // namespace tensorplay::trace
