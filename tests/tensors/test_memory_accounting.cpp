// Tests for memory_accounting.h: storages allocated in a scope are charged to its account until
// freed (on any thread), peaks reset, received tensors are adopted, first gradients are Gradient.
#include <catch2/catch.hpp>
#include <memory>
#include <thread>

#include "tensorplay/tensor.h"

namespace tp = tensorplay;
using tp::MemoryKind;

TEST_CASE("allocations in a scope are charged to its account until freed", "[memory_accounting]") {
  auto account = std::make_shared<tp::MemoryAccount>();
  tp::Tensor outside = tp::empty({100});
  {
    tp::MemoryScope scope(account);
    CHECK(tp::current_memory_account() == account.get());
    tp::Tensor a = tp::empty({256});  // 1 KiB
    CHECK(account->current() == 1024);
    {
      tp::Tensor b = tp::empty({512});
      CHECK(account->current() == 3072);
    }
    CHECK(account->current() == 1024);
    CHECK(account->peak() == 3072);
    CHECK(account->peak(MemoryKind::Activation) == 3072);
    CHECK(account->current(MemoryKind::Gradient) == 0);
  }
  CHECK(tp::current_memory_account() == nullptr);
  CHECK(account->current() == 0);
  account->reset_peaks();
  CHECK(account->peak() == 0);
}

TEST_CASE("a storage freed on another thread credits its own account", "[memory_accounting]") {
  auto account = std::make_shared<tp::MemoryAccount>();
  tp::Tensor t;
  {
    tp::MemoryScope scope(account);
    t = tp::empty({1000});
  }
  CHECK(account->current() == 4000);
  std::thread other([moved = std::move(t)]() mutable { moved = tp::Tensor(); });
  other.join();
  CHECK(account->current() == 0);
}

TEST_CASE("scopes nest and a null scope keeps the current account", "[memory_accounting]") {
  auto outer = std::make_shared<tp::MemoryAccount>();
  auto inner = std::make_shared<tp::MemoryAccount>();
  tp::MemoryScope a(outer);
  {
    tp::MemoryScope b(inner);
    tp::MemoryScope none(nullptr);
    CHECK(tp::current_memory_account() == inner.get());
  }
  CHECK(tp::current_memory_account() == outer.get());
}

TEST_CASE("a parent account sees its children's charges and keeps its own peak",
          "[memory_accounting]") {
  auto rank = std::make_shared<tp::MemoryAccount>();
  auto s0 = std::make_shared<tp::MemoryAccount>(rank);
  auto s1 = std::make_shared<tp::MemoryAccount>(rank);
  tp::Tensor kept;
  {
    tp::MemoryScope scope(s0);
    kept = tp::empty({250});  // 1000 bytes, held
    tp::Tensor transient = tp::empty({250});
  }
  {
    tp::MemoryScope scope(s1);
    tp::Tensor transient = tp::empty({500});  // 2000 bytes
  }
  CHECK(rank->current() == 1000);
  CHECK(rank->peak() == 3000);  // s0's kept 1000 plus s1's transient 2000
  CHECK(s0->peak() == 2000);
  CHECK(s1->peak() == 2000);
  rank->reset_peaks();
  CHECK(rank->peak() == 1000);
  CHECK(rank->base() == 1000);
}

TEST_CASE("adoption charges tensors no account holds to the current one", "[memory_accounting]") {
  auto sender = std::make_shared<tp::MemoryAccount>();
  auto receiver = std::make_shared<tp::MemoryAccount>();
  tp::Tensor sent;
  {
    tp::MemoryScope scope(sender);
    sent = tp::empty({64});
  }
  tp::Tensor received = tp::empty({32});  // as a channel's thread makes it
  tp::adopt_memory({sent, received});     // no scope: nothing moves
  CHECK(sender->current() == 256);
  {
    tp::MemoryScope scope(receiver);
    tp::adopt_memory({sent, received, tp::Tensor()});
  }
  CHECK(sender->current() == 256);  // made in this process: it stays with its maker
  CHECK(receiver->current() == 128);
  received = tp::Tensor();
  CHECK(receiver->current() == 0);
}

TEST_CASE("taking over moves tensors nothing else holds to the current account",
          "[memory_accounting]") {
  auto sender = std::make_shared<tp::MemoryAccount>();
  auto receiver = std::make_shared<tp::MemoryAccount>();
  tp::Tensor sent, kept, received = tp::empty({32});  // received: from another process
  {
    tp::MemoryScope scope(sender);
    sent = tp::empty({64});
    kept = sent.detach();  // the maker's stash shares the storage
  }
  tp::take_over_memory({sent});  // no scope: nothing moves
  {
    tp::MemoryScope scope(receiver);
    tp::take_over_memory({sent, received, tp::Tensor()});
  }
  CHECK(sender->current() == 256);  // the maker still holds it: it stays
  CHECK(receiver->current() == 128);
  // The maker lets go (a recomputing stage keeps only its output's history): the receiver holds
  // the storage alone, so it is charged there.
  kept = tp::Tensor();
  {
    tp::MemoryScope scope(receiver);
    tp::take_over_memory({sent});
  }
  CHECK(sender->current() == 0);
  CHECK(receiver->current() == 384);
  sent = tp::Tensor();
  received = tp::Tensor();
  CHECK(receiver->current() == 0);
}

TEST_CASE("disowned tensors are no account's any more", "[memory_accounting]") {
  auto account = std::make_shared<tp::MemoryAccount>();
  tp::Tensor t;
  {
    tp::MemoryScope scope(account);
    t = tp::empty({64});
  }
  tp::disown_memory({t, tp::Tensor()});
  CHECK(account->current() == 0);
  CHECK(t.impl().storage->memory_account() == nullptr);
  t = tp::Tensor();
  CHECK(account->current() == 0);
}

TEST_CASE("a leaf's first gradient is charged as Gradient, later ones add in place",
          "[memory_accounting]") {
  auto account = std::make_shared<tp::MemoryAccount>();
  tp::Tensor w = tp::randn({16, 16}).requires_grad_(true);
  tp::MemoryScope scope(account);
  for (int i = 0; i < 2; ++i) {
    tp::Tensor loss = tp::sum(tp::matmul(w, w));
    loss.backward();
  }
  CHECK(account->current(MemoryKind::Gradient) == 16 * 16 * 4);
  CHECK(account->peak(MemoryKind::Activation) > 0);
  w.set_grad(tp::Tensor());
  CHECK(account->current(MemoryKind::Gradient) == 0);
}
