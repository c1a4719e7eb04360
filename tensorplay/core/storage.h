// A reference-counted block of device memory that tensors view. Storage comes from the
// allocator registered for its device type (aligned host memory, or CUDA's caching allocator).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "tensorplay/core/device.h"

namespace tensorplay {

class MemoryAccount;
enum class MemoryKind : uint8_t;

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

  /// The account its bytes are charged to (the thread's at allocation, memory_accounting.h), or
  /// null, and as what.
  const std::shared_ptr<MemoryAccount>& memory_account() const { return account_; }
  MemoryKind memory_kind() const { return kind_; }
  /// Charges its bytes to `account` as `kind` from now on (crediting the previous account).
  void recharge(std::shared_ptr<MemoryAccount> account, MemoryKind kind);
  /// Moves its bytes to the Gradient kind of the account they are charged to (none: nothing).
  void charge_as_gradient();

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
  Device device_;
  std::shared_ptr<MemoryAccount> account_;
  MemoryKind kind_{};
};

}  // namespace tensorplay
