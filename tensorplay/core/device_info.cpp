// CPU-side answer of device_info.h; the CUDA build provides cuda_device_count_impl().
#include "tensorplay/core/device_info.h"

namespace tensorplay {

#ifdef TENSORPLAY_WITH_CUDA
int cuda_device_count_impl();  // cuda/cuda_device.cu
bool cuda_built() { return true; }
int cuda_device_count() { return cuda_device_count_impl(); }
#else
bool cuda_built() { return false; }
int cuda_device_count() { return 0; }
#endif

}  // namespace tensorplay
