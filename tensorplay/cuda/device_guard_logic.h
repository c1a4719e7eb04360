// The device guard's decisions, apart from CUDA: which device to make current and what to restore,
// so the rule "never make a device current that the thread did not have" is testable without a GPU.
#pragma once

namespace tensorplay::cuda {

/// How a guard reads and changes the calling thread's current device. `current` returns -1 when
/// the thread has no current device (no CUDA context bound yet).
/// `make_current` may throw; the guard's constructor passes that on, its destructor swallows it.
struct CurrentDeviceOps {
  int (*current)();
  void (*make_current)(int device);
};

/// Makes `device` current for the guard's lifetime and then restores the thread's previous
/// device. A thread that had no current device keeps `device`: restoring "device 0" there would
/// create a context on GPU 0 in a process that only drives another GPU.
class BasicDeviceGuard {
 public:
  BasicDeviceGuard(const CurrentDeviceOps& ops, int device)
      : ops_(ops), previous_(ops.current()), device_(device) {
    if (previous_ != device_) ops_.make_current(device_);
  }
  ~BasicDeviceGuard() {
    if (previous_ < 0) return;  // the thread had no device: nothing to put back
    try {
      if (ops_.current() != previous_) ops_.make_current(previous_);
    } catch (...) {
      // A destructor cannot report it; the next guard sets the device it needs anyway.
    }
  }
  BasicDeviceGuard(const BasicDeviceGuard&) = delete;
  BasicDeviceGuard& operator=(const BasicDeviceGuard&) = delete;

  /// The device current before the guard, or -1 when the thread had none.
  int previous() const { return previous_; }

 private:
  CurrentDeviceOps ops_;
  int previous_;
  int device_;
};

}  // namespace tensorplay::cuda
