// How a TensorMeta is written: in words for messages, compactly for digests.
#include "tensorplay/pipelining/tensor_meta.h"

namespace tensorplay::pipelining {

std::string to_string(const TensorMeta& meta) {
  return tensorplay::to_string(meta.shape) + " " + tensorplay::to_string(meta.dtype);
}

std::string compact_string(const TensorMeta& meta) {
  std::string out = to_string(meta.dtype) + "[";
  for (size_t i = 0; i < meta.shape.size(); ++i) {
    if (i) out += ',';
    out += std::to_string(meta.shape[i]);
  }
  return out + "]";
}

}  // namespace tensorplay::pipelining
