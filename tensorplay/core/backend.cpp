// Registry of kernel tables by device type.
#include "tensorplay/core/backend.h"

#include <array>
#include <stdexcept>
#include <string>

namespace tensorplay {

const Backend& cpu_backend();  // cpu/cpu_backend.cpp
#ifdef TENSORPLAY_WITH_CUDA
const Backend& cuda_backend();  // cuda/cuda_backend.cu
#endif

namespace {
std::array<const Backend*, 2>& backends() {
  // The CUDA table is referenced here rather than self-registered: a static library drops object
  // files nothing references, static initialisers included.
#ifdef TENSORPLAY_WITH_CUDA
  static std::array<const Backend*, 2> table = {&cpu_backend(), &cuda_backend()};
#else
  static std::array<const Backend*, 2> table = {&cpu_backend(), nullptr};
#endif
  return table;
}
}  // namespace

void register_backend(DeviceType type, const Backend* backend) {
  backends()[static_cast<size_t>(type)] = backend;
}

const Backend& backend_for(Device device) {
  const Backend* b = backends()[static_cast<size_t>(device.type)];
  if (!b) {
    throw std::runtime_error("no kernels for device " + to_string(device) +
                             ": this build has no CUDA support");
  }
  return *b;
}

}  // namespace tensorplay
