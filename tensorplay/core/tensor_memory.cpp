// Moving a tensor's storage between accounts and kinds.
#include "tensorplay/core/tensor_memory.h"

#include "tensorplay/core/storage.h"

namespace tensorplay {

void adopt_memory(const std::vector<Tensor>& tensors) {
  const std::shared_ptr<MemoryAccount>& account = current_memory_account_shared();
  if (!account) return;
  for (const Tensor& t : tensors) {
    if (!t.defined() || !t.impl().storage) continue;
    Storage& s = *t.impl().storage;
    if (s.memory_account()) continue;  // made by (and charged to) a stage of this process
    s.recharge(account, MemoryKind::Activation);
  }
}

void take_over_memory(const std::vector<Tensor>& tensors) {
  const std::shared_ptr<MemoryAccount>& account = current_memory_account_shared();
  if (!account) return;
  for (const Tensor& t : tensors) {
    if (!t.defined() || !t.impl().storage) continue;
    Storage& s = *t.impl().storage;
    // Held elsewhere too (the maker's stash): it stays where it is charged.
    if (s.memory_account() == account || t.impl().storage.use_count() != 1) continue;
    s.recharge(account, MemoryKind::Activation);
  }
}

void disown_memory(const std::vector<Tensor>& tensors) {
  for (const Tensor& t : tensors) {
    if (!t.defined() || !t.impl().storage) continue;
    Storage& s = *t.impl().storage;
    if (s.memory_account()) s.recharge(nullptr, s.memory_kind());
  }
}

void mark_gradient_memory(const Tensor& tensor) {
  if (tensor.defined() && tensor.impl().storage) tensor.impl().storage->charge_as_gradient();
}

}  // namespace tensorplay
