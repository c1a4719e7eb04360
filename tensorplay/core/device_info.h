// What accelerators this process can use: whether CUDA was built in and how many devices answer.
// Tests use it to skip GPU cases on machines without a GPU.
#pragma once

namespace tensorplay {

/// True when this build has the CUDA path compiled in.
bool cuda_built();
/// Number of CUDA devices present (0 without a GPU or without CUDA support).
int cuda_device_count();
/// True when at least one CUDA device can be used.
inline bool cuda_available() { return cuda_device_count() > 0; }

}  // namespace tensorplay
