// Names of element types.
#include "tensorplay/core/dtype.h"

namespace tensorplay {

std::string to_string(DType dtype) { return dtype == DType::Float32 ? "float32" : "bfloat16"; }

}  // namespace tensorplay
