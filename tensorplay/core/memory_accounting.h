// Per-owner accounting of the bytes tensors hold: a thread sets the account its allocations are
// charged to (a pipeline stage's, while the stage runs an action); each storage remembers it.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

namespace tensorplay {

class Storage;

/// What a charged storage holds.
enum class MemoryKind : uint8_t {
  Activation = 0,  ///< anything an action allocates: stashed activations, workspaces, outputs
  Gradient = 1,    ///< a parameter's .grad (autograd moves a leaf's first gradient here)
};

/// Current and peak bytes charged to one owner, by kind and in total, since the last
/// reset_peaks(). Thread-safe: storages allocated on one thread may be freed on another.
/// An account may have a parent (a rank over its stages) that sees every charge too.
class MemoryAccount {
 public:
  explicit MemoryAccount(std::shared_ptr<MemoryAccount> parent = nullptr);
  MemoryAccount(const MemoryAccount&) = delete;
  MemoryAccount& operator=(const MemoryAccount&) = delete;

  /// Charges (or, with negative bytes, credits) `bytes` of `kind`, here and in the parents.
  void charge(MemoryKind kind, int64_t bytes);
  /// Bytes held now (of one kind, or of both).
  int64_t current(MemoryKind kind) const;
  int64_t current() const;
  /// Highest bytes held since the last reset_peaks() (of one kind, or of both together).
  int64_t peak(MemoryKind kind) const;
  int64_t peak() const;
  /// Bytes held at the last reset_peaks() (of one kind, or of both).
  int64_t base(MemoryKind kind) const;
  int64_t base() const;
  /// Peaks and bases become the bytes held now (the start of a step).
  void reset_peaks();

  /// Sets the parent; charges made from now on reach it (the bytes held now are moved to it).
  /// Call it while no other thread charges the account (before a step).
  void set_parent(std::shared_ptr<MemoryAccount> parent);
  const std::shared_ptr<MemoryAccount>& parent() const { return parent_; }

 private:
  static constexpr int kTotal = 2;
  std::atomic<int64_t> current_[3] = {0, 0, 0};
  std::atomic<int64_t> peak_[3] = {0, 0, 0};
  std::atomic<int64_t> base_[3] = {0, 0, 0};
  std::shared_ptr<MemoryAccount> parent_;
};

/// The account this thread's allocations are charged to (null: none, the default).
MemoryAccount* current_memory_account();
/// The same, shared (what a new Storage keeps).
const std::shared_ptr<MemoryAccount>& current_memory_account_shared();

/// Charges this thread's allocations to `account` while it lives (null keeps the current one),
/// as Activation bytes; restores the previous account at its end. Scopes nest.
class MemoryScope {
 public:
  explicit MemoryScope(std::shared_ptr<MemoryAccount> account);
  ~MemoryScope();
  MemoryScope(const MemoryScope&) = delete;
  MemoryScope& operator=(const MemoryScope&) = delete;

 private:
  std::shared_ptr<MemoryAccount> previous_;
  bool active_ = false;
};

}  // namespace tensorplay
