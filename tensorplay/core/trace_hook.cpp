// Thread-local recorder and module path for tracing.
#include "tensorplay/core/trace_hook.h"

namespace tensorplay::trace {
namespace {
thread_local OpRecorder* recorder = nullptr;
thread_local std::string module_path;
thread_local const void* module_now = nullptr;
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

const void* current_module() { return module_now; }

ModulePathScope::ModulePathScope(const std::string& name, const void* module)
    : previous_length_(module_path.size()), previous_module_(module_now), pushed_(!name.empty()) {
  if (!pushed_) return;
  if (module) module_now = module;
  if (!module_path.empty()) module_path += '.';
  module_path += name;
  if (recorder) recorder->enter_module(module_path);
}

ModulePathScope::~ModulePathScope() {
  if (!pushed_) return;
  if (recorder) recorder->exit_module(module_path);
  module_path.resize(previous_length_);
  module_now = previous_module_;
}

}  // namespace tensorplay::trace
