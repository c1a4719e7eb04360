// A reference-counted block of device memory that tensors view. Storage comes from the
// allocator registered for its device type (aligned host memory, or CUDA's caching allocator).
#pragma once

#include <cstddef>
#include <memory>

#include "tensors/device.h"

namespace tensorplay {

/// Hands out and takes back raw memory for one device type.
class Allocator {
 public:
  virtual ~Allocator() = default;
  /// Memory of at least `bytes` bytes on `device`; throws std::bad_alloc or std::runtime_error.
  virtual void* allocate(size_t bytes, Device device) = 0;
  /// Returns memory from allocate().
  virtual void deallocate(void* ptr, size_t bytes, Device device) = 0;
};

/// Installs the allocator for a device type (the CUDA backend registers itself when built).
void register_allocator(DeviceType type, Allocator* allocator);

/// The allocator for a device type; throws naming the device when none is registered.
Allocator& allocator_for(Device device);

/// Owns one allocation; tensors share it through std::shared_ptr<Storage>.
class Storage {
 public:
  Storage(size_t bytes, Device device);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  Device device() const { return device_; }

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
  Device device_;
};

}  // namespace tensorplay
