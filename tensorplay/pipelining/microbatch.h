// Microbatching: splitting a batch's inputs into microbatches along a chunk dimension, and merging
// per-microbatch outputs back, as TensorChunkSpec, split_args_kwargs_into_chunks and merge_chunks
// do in PyTorch's pipelining.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "tensorplay/core/tensor.h"
#include "tensorplay/nn/module.h"

namespace tensorplay::pipelining {

/// Split a tensor along `dim` (negative counts from the end).
struct TensorChunkSpec {
  int64_t dim = 0;
};

/// Give every microbatch the whole value (a mask, a scale, a non-tensor setting).
struct Replicate {};

/// How one input is divided among microbatches.
using ChunkSpec = std::variant<TensorChunkSpec, Replicate>;

/// Combines two per-microbatch outputs into one (merge_chunks folds it left to right).
struct Reducer {
  std::function<Tensor(const Tensor&, const Tensor&)> combine;
};
/// Adds the per-microbatch values (losses).
Reducer sum_reducer();

/// Leave an output per microbatch: no merged tensor (a schedule's step returns the chunks).
struct KeepMicrobatches {};

/// How per-microbatch outputs are merged: concatenated along a dim, taken from the first
/// microbatch (Replicate), reduced, or kept per microbatch.
using MergeSpec = std::variant<TensorChunkSpec, Replicate, Reducer, KeepMicrobatches>;

/// An input to a forward that is not necessarily a tensor; plain values are replicated.
using Arg = std::variant<Tensor, int64_t, double, bool, std::string>;
using Args = std::vector<Arg>;
using Kwargs = std::map<std::string, Arg>;

/// Splits `args` and `kwargs` into `n` microbatches: result.first[mb][i] is microbatch mb of
/// args[i], result.second[mb][name] of kwargs[name]. Tensors split along their spec's dim
/// (dim 0 when no spec is given) into chunks as torch.tensor_split makes them: uneven sizes
/// allowed, the first size % n chunks one longer; a dimension shorter than n is an error.
/// Replicated inputs and non-tensor values go whole into every microbatch. Chunks along dim 0
/// are views.
std::pair<std::vector<Args>, std::vector<Kwargs>> split_args_kwargs_into_chunks(
    const Args& args, const Kwargs& kwargs, int n, const std::vector<ChunkSpec>& args_specs = {},
    const std::map<std::string, ChunkSpec>& kwargs_specs = {});

/// The same for tensor-only inputs (what nn::Module::forward_args takes).
std::pair<std::vector<std::vector<Tensor>>, std::vector<nn::TensorDict>>
split_args_kwargs_into_chunks(const std::vector<Tensor>& args, const nn::TensorDict& kwargs, int n,
                              const std::vector<ChunkSpec>& args_specs = {},
                              const std::map<std::string, ChunkSpec>& kwargs_specs = {});

/// Splits each tensor of `args` into `n` chunks along its spec's dimension (dim 0 by default):
/// result[mb][i] is chunk mb of args[i]. When `allow_uneven` is false, a size not divisible by
/// n is an error naming the input and the sizes.
std::vector<std::vector<Tensor>> split_into_microbatches(
    const std::vector<Tensor>& args, int n, const std::vector<TensorChunkSpec>& specs = {},
    bool allow_uneven = false);

/// The weight of each microbatch in a batch mean: its size along `spec`'s dim over the batch's
/// (1/n for each when the sizes are equal, or when `spec` is Replicate), so per-microbatch mean
/// losses weighted by these add up to the mean over the whole batch, as the unsplit model's.
std::vector<float> microbatch_weights(const std::vector<Tensor>& chunks, const ChunkSpec& spec);

/// Concatenates per-microbatch tensors along `dim`.
Tensor merge_chunks(const std::vector<Tensor>& chunks, int64_t dim = 0);
/// Merges per-microbatch tensors as `spec` says (KeepMicrobatches is an error: there is no one
/// tensor to return).
Tensor merge_chunks(const std::vector<Tensor>& chunks, const MergeSpec& spec);
/// Merges per-microbatch output lists (chunks[mb][i]); `specs[i]` for output i (default: cat
/// along dim 0).
std::vector<Tensor> merge_chunks(const std::vector<std::vector<Tensor>>& chunks,
                                 const std::vector<MergeSpec>& specs = {});
/// Merges per-microbatch keyword outputs by name.
nn::TensorDict merge_chunks(const std::vector<nn::TensorDict>& chunks,
                            const std::map<std::string, MergeSpec>& specs = {});

}  // namespace tensorplay::pipelining
