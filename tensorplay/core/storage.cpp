// Storage and the per-device allocator registry (the host's caching allocator is in
// host_allocator.cpp, CUDA's in cuda/cuda_allocator.cu).
#include "tensorplay/core/storage.h"

#include <array>
#include <new>
#include <stdexcept>
#include <string>
#include <utility>

#include "tensorplay/core/memory_accounting.h"

namespace tensorplay {

Allocator& host_allocator();  // host_allocator.cpp
#ifdef TENSORPLAY_WITH_CUDA
Allocator& cuda_allocator();  // cuda/cuda_allocator.cu
#endif

namespace {

std::array<Allocator*, 2>& allocators() {
#ifdef TENSORPLAY_WITH_CUDA
  static std::array<Allocator*, 2> table = {&host_allocator(), &cuda_allocator()};
#else
  static std::array<Allocator*, 2> table = {&host_allocator(), nullptr};
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

namespace {

// The allocator's std::bad_alloc says nothing; this names the size, the device and what to try.
void* allocate_or_explain(size_t bytes, Device device) {
  Allocator& allocator = allocator_for(device);
  try {
    return allocator.allocate(bytes, device);
  } catch (const std::bad_alloc&) {
    throw std::runtime_error("out of memory: cannot allocate " + std::to_string(bytes) +
                             " bytes (" + std::to_string(bytes >> 20) + " MiB) on " +
                             to_string(device) +
                             " for a tensor; use smaller tensors (batch, microbatch, model "
                             "width) or free tensors still referenced");
  }
}

}  // namespace

Storage::Storage(size_t bytes, Device device)
    : data_(allocate_or_explain(bytes, device)),
      bytes_(bytes),
      device_(device),
      account_(current_memory_account_shared()),
      kind_(MemoryKind::Activation) {
  if (account_) account_->charge(kind_, static_cast<int64_t>(bytes_));
}

Storage::~Storage() {
  if (account_) account_->charge(kind_, -static_cast<int64_t>(bytes_));
  allocator_for(device_).deallocate(data_, bytes_, device_);
}

void Storage::recharge(std::shared_ptr<MemoryAccount> account, MemoryKind kind) {
  if (account) account->charge(kind, static_cast<int64_t>(bytes_));
  if (account_) account_->charge(kind_, -static_cast<int64_t>(bytes_));
  account_ = std::move(account);
  kind_ = kind;
}

void Storage::charge_as_gradient() {
  if (account_ && kind_ != MemoryKind::Gradient) recharge(account_, MemoryKind::Gradient);
}

}  // namespace tensorplay
