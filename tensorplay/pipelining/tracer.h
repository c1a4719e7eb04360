// The tracer: runs a module's forward once on example inputs with a recorder active and returns
// the Graph of the ops it ran, as torch.export does for pipeline splitting.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "tensorplay/nn/module.h"
#include "tensorplay/pipelining/graph.h"

namespace tensorplay::pipelining {

/// Traces `module.forward_outputs(args, kwargs)` on one microbatch of example inputs.
///
/// What the graph holds:
/// - inputs: the positional inputs ("arg0", "arg1", ...), then the keyword inputs by name;
/// - parameters and buffers of `module`, recognised by tensor identity and named by their
///   dotted path (a tensor registered under several names takes the first, as PyTorch dedups);
/// - constants: tensors the forward used that no recorded op produced and that are not
///   inputs, parameters or buffers (a mask made with `ones`), kept by value;
/// - one node per op, with the module path it ran in (its place in the module tree, so a
///   ModuleList that is never called itself still appears: `blocks.0.attn`), and the op's
///   replay closure; nodes whose results nothing uses are dropped;
/// - where each module's nodes start and end, and where pipe_split() was called.
///
/// Limits, as with torch.export: the trace records the path the forward took for these
/// inputs. Data-dependent control flow (a branch on a tensor's values, a loop whose count
/// depends on data) is frozen to what happened here, and each op's attributes (a reshape's
/// target shape) are those of the example: later inputs must take the same path and, except
/// where an op's replay adapts, have the same shapes. Train/eval mode is part of those
/// attributes (a dropout traced in training mode replays in training mode): trace in the mode
/// the stages will run in. Ops must report themselves through
/// trace::record: a tensor that carries autograd history but was made by an op that did not
/// is an error naming the op that consumed it.
Graph trace(nn::Module& module, const std::vector<Tensor>& args, const nn::TensorDict& kwargs = {});

/// Every module below `root` (and `root` itself, path ""), with dotted paths, in
/// registration order. Works for modules not owned by a shared_ptr.
std::vector<std::pair<std::string, nn::Module*>> module_tree(nn::Module& root);

}  // namespace tensorplay::pipelining
