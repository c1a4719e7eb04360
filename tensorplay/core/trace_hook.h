// The seam through which pipelining/ traces a model: ops report themselves to the active recorder,
// and modules announce the path they run in. Tensors know nothing of graphs beyond this interface.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "tensorplay/core/tensor.h"

namespace tensorplay::trace {

/// Re-runs an op on new inputs (same attributes as when it was recorded).
using ReplayFn = std::function<Tensor(const std::vector<Tensor>&)>;

/// Receives every op executed on this thread while it is active.
class OpRecorder {
 public:
  virtual ~OpRecorder() = default;
  /// One op ran: `op` names it, `inputs` and `output` are the tensors, `replay` recomputes it.
  virtual void record_op(const char* op, const std::vector<Tensor>& inputs, const Tensor& output,
                         ReplayFn replay) = 0;
  /// pipe_split() was called.
  virtual void record_split() = 0;
  /// A module (at `path`) starts or ends its forward.
  virtual void enter_module(const std::string& path) = 0;
  virtual void exit_module(const std::string& path) = 0;
};

/// The recorder active on this thread, or null (the usual case: no overhead beyond a check).
OpRecorder* active_recorder();
/// Sets the thread's recorder (null to stop); returns the previous one.
OpRecorder* set_active_recorder(OpRecorder* recorder);

/// Reports an op to the active recorder, if any; returns `output`.
Tensor record(const char* op, const std::vector<Tensor>& inputs, const Tensor& output,
              ReplayFn replay);

/// Dotted path of the module running now ("" at the top).
const std::string& current_module_path();

/// The module whose forward runs now (innermost ModulePathScope given one), or null. The tracer
/// uses it to name modules by their place in the module tree: the call-stack path skips
/// containers that are never called themselves (a ModuleList's `blocks` in `blocks.0`).
const void* current_module();

/// Pushes a child module name (and, when given, the module itself) onto the path for its
/// lifetime.
class ModulePathScope {
 public:
  explicit ModulePathScope(const std::string& name, const void* module = nullptr);
  ~ModulePathScope();
  ModulePathScope(const ModulePathScope&) = delete;
  ModulePathScope& operator=(const ModulePathScope&) = delete;

 private:
  size_t previous_length_;
  const void* previous_module_;
  bool pushed_;
};

}  // namespace tensorplay::trace
