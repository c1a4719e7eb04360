// Storage and the per-device allocator registry; the host allocator hands out 64-byte aligned
// memory.
#include "tensors/storage.h"

#include <array>
#include <cstdlib>
#include <new>
#include <stdexcept>
#include <string>

namespace tensorplay {

#ifdef TENSORPLAY_WITH_CUDA
Allocator& cuda_allocator();  // cuda/cuda_allocator.cu
#endif

namespace {

class HostAllocator final : public Allocator {
 public:
  void* allocate(size_t bytes, Device) override {
    size_t rounded = (bytes + 63) / 64 * 64;
    void* p = std::aligned_alloc(64, rounded == 0 ? 64 : rounded);
    if (!p) throw std::bad_alloc();
    return p;
  }
  void deallocate(void* ptr, size_t, Device) override { std::free(ptr); }
};

std::array<Allocator*, 2>& allocators() {
  static HostAllocator host;
#ifdef TENSORPLAY_WITH_CUDA
  static std::array<Allocator*, 2> table = {&host, &cuda_allocator()};
#else
  static std::array<Allocator*, 2> table = {&host, nullptr};
#endif
  return table;
}

}  // namespace

void register_allocator(DeviceType type, Allocator* allocator) {
  allocators()[static_cast<size_t>(type)] = allocator;
}

Allocator& allocator_for(Device device) {
  Allocator* a = allocators()[static_cast<size_t>(device.type)];
  if (!a) {
    throw std::runtime_error("no allocator for device " + to_string(device) +
                             ": this build has no CUDA support (configure with the CUDA toolkit "
                             "installed) or no GPU is present");
  }
  return *a;
}

Storage::Storage(size_t bytes, Device device)
    : data_(allocator_for(device).allocate(bytes, device)), bytes_(bytes), device_(device) {}

Storage::~Storage() { allocator_for(device_).deallocate(data_, bytes_, device_); }

}  // namespace tensorplay
