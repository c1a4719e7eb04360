// Keeping one rank's share of a parameter in place, so every holder of the tensor (a module's
// member, a tied module, an optimizer made later) sees the shard.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "tensorplay/core/tensor.h"
#include "tensorplay/nn/module.h"

namespace tensorplay::distributed::tensor_parallel::detail {

/// Replaces `t`'s contents by piece `rank` of `count` along `dim`. With `packed` > 1 the
/// dimension holds `packed` equal parts side by side (GPT's fused q, k, v) and each part is cut,
/// the rank keeping its piece of each, in order. The gradient is dropped. The size must divide.
/// The split is recorded for shard_spec_of.
void shard_in_place(const Tensor& t, int64_t dim, int64_t rank, int64_t count, int64_t packed = 1);

/// How a tensor was split by shard_in_place: along `dim`, in `count` pieces of `packed` parts.
struct ShardSpec {
  int64_t dim = 0;
  int64_t count = 1;
  int64_t packed = 1;
};
/// The split of `t` (the very tensor shard_in_place was given, or one sharing its TensorImpl),
/// or nothing for a tensor kept whole.
std::optional<ShardSpec> shard_spec_of(const Tensor& t);

/// The module as a T, or an std::invalid_argument naming the path, the style and what it takes.
template <typename T>
const T& module_as(const nn::Module& module, const std::string& path, const char* style,
                   const char* expected) {
  const auto* typed = dynamic_cast<const T*>(&module);
  if (typed == nullptr)
    throw std::invalid_argument(std::string(style) + ": '" + path + "' is a " + module.type_name() +
                                ", but the style splits a " + expected);
  return *typed;
}

/// Throws std::invalid_argument unless `count` divides `size`, naming the module, what the size
/// is and the tp degree.
void check_divides(int64_t size, int64_t count, const std::string& path, const char* style,
                   const char* what);

}  // namespace tensorplay::distributed::tensor_parallel::detail
