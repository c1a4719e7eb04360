// Memory accounts: atomic current and peak counters, the thread's current account, and the moves
// of a storage between accounts and kinds.
#include "tensorplay/core/memory_accounting.h"

#include <utility>

namespace tensorplay {
namespace {

thread_local std::shared_ptr<MemoryAccount> current_account;

void raise_peak(std::atomic<int64_t>& peak, int64_t value) {
  int64_t seen = peak.load(std::memory_order_relaxed);
  while (value > seen && !peak.compare_exchange_weak(seen, value, std::memory_order_relaxed)) {
  }
}

int index_of(MemoryKind kind) { return static_cast<int>(kind); }

}  // namespace

MemoryAccount::MemoryAccount(std::shared_ptr<MemoryAccount> parent) : parent_(std::move(parent)) {}

void MemoryAccount::charge(MemoryKind kind, int64_t bytes) {
  const int k = index_of(kind);
  const int64_t now = current_[k].fetch_add(bytes, std::memory_order_relaxed) + bytes;
  const int64_t total = current_[kTotal].fetch_add(bytes, std::memory_order_relaxed) + bytes;
  if (bytes > 0) {
    raise_peak(peak_[k], now);
    raise_peak(peak_[kTotal], total);
  }
  if (parent_) parent_->charge(kind, bytes);
}

int64_t MemoryAccount::current(MemoryKind kind) const {
  return current_[index_of(kind)].load(std::memory_order_relaxed);
}
int64_t MemoryAccount::current() const { return current_[kTotal].load(std::memory_order_relaxed); }
int64_t MemoryAccount::peak(MemoryKind kind) const {
  return peak_[index_of(kind)].load(std::memory_order_relaxed);
}
int64_t MemoryAccount::peak() const { return peak_[kTotal].load(std::memory_order_relaxed); }
int64_t MemoryAccount::base(MemoryKind kind) const {
  return base_[index_of(kind)].load(std::memory_order_relaxed);
}
int64_t MemoryAccount::base() const { return base_[kTotal].load(std::memory_order_relaxed); }

void MemoryAccount::reset_peaks() {
  for (int k = 0; k <= kTotal; ++k) {
    const int64_t now = current_[k].load(std::memory_order_relaxed);
    base_[k].store(now, std::memory_order_relaxed);
    peak_[k].store(now, std::memory_order_relaxed);
  }
}

void MemoryAccount::set_parent(std::shared_ptr<MemoryAccount> parent) {
  if (parent_ == parent) return;
  const int64_t held[2] = {current(MemoryKind::Activation), current(MemoryKind::Gradient)};
  for (int k = 0; k < 2; ++k) {
    if (parent_) parent_->charge(static_cast<MemoryKind>(k), -held[k]);
    if (parent) parent->charge(static_cast<MemoryKind>(k), held[k]);
  }
  parent_ = std::move(parent);
}

MemoryAccount* current_memory_account() { return current_account.get(); }

const std::shared_ptr<MemoryAccount>& current_memory_account_shared() { return current_account; }

MemoryScope::MemoryScope(std::shared_ptr<MemoryAccount> account) {
  if (!account) return;
  previous_ = std::exchange(current_account, std::move(account));
  active_ = true;
}

MemoryScope::~MemoryScope() {
  if (active_) current_account = std::move(previous_);
}

}  // namespace tensorplay
