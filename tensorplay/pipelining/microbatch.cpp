// Splitting inputs into microbatches and merging outputs.
#include "tensorplay/pipelining/microbatch.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "tensorplay/core/ops/elementwise.h"
#include "tensorplay/core/ops/shape_ops.h"

namespace tensorplay::pipelining {

namespace {

/// Chunks of `t` along `dim` as torch.tensor_split makes them.
std::vector<Tensor> split_tensor(const Tensor& t, int n, int64_t dim, bool allow_uneven,
                                 const std::string& what) {
  if (!t.defined()) throw std::invalid_argument(what + " is undefined");
  if (t.dim() == 0)
    throw std::invalid_argument(what +
                                " is a scalar: it has no dimension to split into "
                                "microbatches (replicate it instead)");
  dim = wrap_dim(dim, t.dim(), "split into microbatches");
  int64_t size = t.shape()[dim];
  if (size < n)
    throw std::invalid_argument(what + " has size " + std::to_string(size) + " along dim " +
                                std::to_string(dim) + ", fewer than the " + std::to_string(n) +
                                " microbatches");
  if (!allow_uneven && size % n != 0)
    throw std::invalid_argument(what + " has size " + std::to_string(size) + " along dim " +
                                std::to_string(dim) + ", not divisible into " + std::to_string(n) +
                                " microbatches: use a batch size that is a multiple of " +
                                std::to_string(n));
  // As torch.tensor_split: the first size % n chunks get one extra element.
  std::vector<Tensor> out;
  int64_t base = size / n, extra = size % n, start = 0;
  for (int mb = 0; mb < n; ++mb) {
    int64_t len = base + (mb < extra ? 1 : 0);
    out.push_back(dim == 0 ? t.slice0(start, start + len) : narrow(t, dim, start, len));
    start += len;
  }
  return out;
}

void check_count(int n) {
  if (n < 1)
    throw std::invalid_argument("the number of microbatches must be at least 1, got " +
                                std::to_string(n));
}

/// The chunks of one argument: split when it is a tensor with a TensorChunkSpec, else copies.
std::vector<Arg> split_arg(const Arg& arg, int n, const ChunkSpec* spec, const std::string& what) {
  const Tensor* t = std::get_if<Tensor>(&arg);
  bool replicate = spec && std::holds_alternative<Replicate>(*spec);
  if (!t) {
    if (spec && !replicate)
      throw std::invalid_argument(what +
                                  " is not a tensor, so it cannot be split along a dim; "
                                  "give it Replicate{} (or no spec)");
    return std::vector<Arg>(n, arg);
  }
  if (replicate) return std::vector<Arg>(n, arg);
  int64_t dim = spec ? std::get<TensorChunkSpec>(*spec).dim : 0;
  std::vector<Arg> out;
  for (Tensor& c : split_tensor(*t, n, dim, true, what)) out.emplace_back(c);
  return out;
}

}  // namespace

Reducer sum_reducer() {
  return {[](const Tensor& a, const Tensor& b) { return add(a, b); }};
}

std::pair<std::vector<Args>, std::vector<Kwargs>> split_args_kwargs_into_chunks(
    const Args& args, const Kwargs& kwargs, int n, const std::vector<ChunkSpec>& args_specs,
    const std::map<std::string, ChunkSpec>& kwargs_specs) {
  check_count(n);
  if (!args_specs.empty() && args_specs.size() != args.size())
    throw std::invalid_argument("got " + std::to_string(args_specs.size()) + " chunk specs for " +
                                std::to_string(args.size()) + " positional inputs");
  for (const auto& [name, spec] : kwargs_specs)
    if (!kwargs.count(name))
      throw std::invalid_argument("chunk spec for keyword input '" + name +
                                  "', which is not among the inputs");
  std::vector<Args> arg_chunks(n, Args(args.size()));
  std::vector<Kwargs> kwarg_chunks(n);
  for (size_t i = 0; i < args.size(); ++i) {
    auto chunks = split_arg(args[i], n, args_specs.empty() ? nullptr : &args_specs[i],
                            "input " + std::to_string(i));
    for (int mb = 0; mb < n; ++mb) arg_chunks[mb][i] = std::move(chunks[mb]);
  }
  for (const auto& [name, value] : kwargs) {
    auto it = kwargs_specs.find(name);
    auto chunks = split_arg(value, n, it == kwargs_specs.end() ? nullptr : &it->second,
                            "keyword input '" + name + "'");
    for (int mb = 0; mb < n; ++mb) kwarg_chunks[mb].emplace(name, std::move(chunks[mb]));
  }
  return {std::move(arg_chunks), std::move(kwarg_chunks)};
}

std::pair<std::vector<std::vector<Tensor>>, std::vector<nn::TensorDict>>
split_args_kwargs_into_chunks(const std::vector<Tensor>& args, const nn::TensorDict& kwargs, int n,
                              const std::vector<ChunkSpec>& args_specs,
                              const std::map<std::string, ChunkSpec>& kwargs_specs) {
  Args a(args.begin(), args.end());
  Kwargs k(kwargs.begin(), kwargs.end());
  auto [arg_chunks, kwarg_chunks] =
      split_args_kwargs_into_chunks(a, k, n, args_specs, kwargs_specs);
  std::vector<std::vector<Tensor>> tensor_args(n);
  std::vector<nn::TensorDict> tensor_kwargs(n);
  for (int mb = 0; mb < n; ++mb) {
    for (Arg& x : arg_chunks[mb]) tensor_args[mb].push_back(std::get<Tensor>(x));
    for (auto& [name, x] : kwarg_chunks[mb]) tensor_kwargs[mb].emplace(name, std::get<Tensor>(x));
  }
  return {std::move(tensor_args), std::move(tensor_kwargs)};
}

std::vector<std::vector<Tensor>> split_into_microbatches(const std::vector<Tensor>& args, int n,
                                                         const std::vector<TensorChunkSpec>& specs,
                                                         bool allow_uneven) {
  check_count(n);
  if (!specs.empty() && specs.size() != args.size())
    throw std::invalid_argument("got " + std::to_string(specs.size()) + " chunk specs for " +
                                std::to_string(args.size()) + " inputs");
  std::vector<std::vector<Tensor>> out(n);
  for (size_t i = 0; i < args.size(); ++i) {
    auto chunks = split_tensor(args[i], n, specs.empty() ? 0 : specs[i].dim, allow_uneven,
                               "input " + std::to_string(i));
    for (int mb = 0; mb < n; ++mb) out[mb].push_back(chunks[mb]);
  }
  return out;
}

std::vector<float> microbatch_weights(const std::vector<Tensor>& chunks, const ChunkSpec& spec) {
  const size_t n = chunks.size();
  std::vector<float> equal(n, n == 0 ? 0.0f : 1.0f / static_cast<float>(n));
  const auto* split = std::get_if<TensorChunkSpec>(&spec);
  if (!split || n == 0) return equal;
  std::vector<int64_t> sizes;
  int64_t total = 0;
  for (const Tensor& c : chunks) {
    if (!c.defined() || c.dim() == 0) return equal;
    sizes.push_back(c.shape()[wrap_dim(split->dim, c.dim(), "microbatch_weights")]);
    total += sizes.back();
  }
  // Equal sizes keep exactly 1/n, the weight of the even case.
  if (std::all_of(sizes.begin(), sizes.end(), [&](int64_t s) { return s == sizes.front(); }))
    return equal;
  std::vector<float> out;
  for (int64_t s : sizes)
    out.push_back(static_cast<float>(static_cast<double>(s) / static_cast<double>(total)));
  return out;
}

Tensor merge_chunks(const std::vector<Tensor>& chunks, int64_t dim) { return cat(chunks, dim); }

Tensor merge_chunks(const std::vector<Tensor>& chunks, const MergeSpec& spec) {
  if (chunks.empty()) throw std::invalid_argument("merge_chunks: no chunks to merge");
  if (const auto* s = std::get_if<TensorChunkSpec>(&spec)) return cat(chunks, s->dim);
  if (std::holds_alternative<Replicate>(spec)) return chunks.front();
  if (std::holds_alternative<KeepMicrobatches>(spec))
    throw std::invalid_argument(
        "merge_chunks: KeepMicrobatches leaves the outputs per microbatch; there is no merged "
        "tensor (read the per-microbatch outputs instead)");
  const Reducer& r = std::get<Reducer>(spec);
  if (!r.combine) throw std::invalid_argument("merge_chunks: the reducer has no function");
  Tensor acc = chunks.front();
  for (size_t i = 1; i < chunks.size(); ++i) acc = r.combine(acc, chunks[i]);
  return acc;
}

std::vector<Tensor> merge_chunks(const std::vector<std::vector<Tensor>>& chunks,
                                 const std::vector<MergeSpec>& specs) {
  if (chunks.empty()) throw std::invalid_argument("merge_chunks: no chunks to merge");
  const size_t count = chunks.front().size();
  if (!specs.empty() && specs.size() != count)
    throw std::invalid_argument("merge_chunks: got " + std::to_string(specs.size()) +
                                " specs for " + std::to_string(count) + " outputs");
  std::vector<Tensor> out;
  for (size_t i = 0; i < count; ++i) {
    std::vector<Tensor> column;
    for (size_t mb = 0; mb < chunks.size(); ++mb) {
      if (chunks[mb].size() != count)
        throw std::invalid_argument("merge_chunks: microbatch " + std::to_string(mb) + " has " +
                                    std::to_string(chunks[mb].size()) +
                                    " outputs, microbatch 0 has " + std::to_string(count));
      column.push_back(chunks[mb][i]);
    }
    out.push_back(merge_chunks(column, specs.empty() ? MergeSpec{TensorChunkSpec{0}} : specs[i]));
  }
  return out;
}

nn::TensorDict merge_chunks(const std::vector<nn::TensorDict>& chunks,
                            const std::map<std::string, MergeSpec>& specs) {
  if (chunks.empty()) throw std::invalid_argument("merge_chunks: no chunks to merge");
  nn::TensorDict out;
  for (const auto& [name, first] : chunks.front()) {
    std::vector<Tensor> column;
    for (size_t mb = 0; mb < chunks.size(); ++mb) {
      auto it = chunks[mb].find(name);
      if (it == chunks[mb].end())
        throw std::invalid_argument("merge_chunks: microbatch " + std::to_string(mb) +
                                    " lacks output '" + name + "'");
      column.push_back(it->second);
    }
    auto spec = specs.find(name);
    out.emplace(name, merge_chunks(column, spec == specs.end() ? MergeSpec{TensorChunkSpec{0}}
                                                               : spec->second));
  }
  return out;
}

}  // namespace tensorplay::pipelining
