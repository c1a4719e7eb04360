// The ring all-reduce over a Channel.
//
// Member i of n sends to i+1 and receives from i-1. Reduce-scatter step s (0 <= s < n-1): i sends
// chunk i-s (its own at s = 0, else the partial sum it received at step s-1) and receives the
// partial sum of chunk i-1-s, to which it adds its own; after n-1 steps it holds the sum of chunk
// i+1. All-gather step s: i sends chunk i+1-s (the sum it holds, then the one it received at step
// s-1) and receives the sum of chunk i-s, which it copies into place. Empty chunks (fewer
// elements than members) are neither sent nor received.
//
// A send's bytes must not change until they have left (the channel reads them on its own thread).
// Only reduce-scatter step 0 sends from `flat` itself: chunk i, which this member overwrites only
// when the sum of chunk i arrives, and that sum was made from what member i+1 received. Every
// other send is a buffer the channel handed over on a receive, which nothing writes once it is
// sent; so `flat` is the caller's again when the call returns, with no wait for sends.
//
// Besides the chunks, step 0 carries a header (dtype, element count, shape, member count) that
// the receiver compares with its own, and every member gets one status message from the member
// before it: "done" when that one finished, or "gave up" with its reason, which the member
// forwards to the next one and throws. A member whose predecessor has delivered in this call and
// then goes quiet waits a grace period for such a reason before blaming it, so that every member
// names the member that was missing rather than the neighbour that was waiting for it. Each
// receive is posted when the step before it completed, so a member's deadline never comes before
// its predecessor's.
#include "tensorplay/transport/ring_all_reduce.h"

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>

#include "tensorplay/core/backend.h"
#include "tensorplay/core/detail/fnv1a.h"
#include "tensorplay/transport/collective_key.h"

namespace tensorplay::transport {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr int64_t kStatusFloats = 256;  // 1 KiB: a code and the reason
constexpr uint8_t kDone = 1;
constexpr uint8_t kGaveUp = 2;
constexpr int64_t kHeaderWords = 8;            // sent as float32 elements of the same size
constexpr uint32_t kHeaderMagic = 0x52494e47;  // "RING"
constexpr int64_t kBlock = 8192;               // bfloat16 elements widened per pass
constexpr milliseconds kLateTimer{1000};  // how late the channel may end a receive at its timeout

// Where chunk c lies in the flat tensor: the first numel % n chunks hold one element more.
struct Chunks {
  int64_t numel = 0;
  int64_t n = 1;
  int64_t begin(int64_t c) const { return c * (numel / n) + std::min(c, numel % n); }
  int64_t size(int64_t c) const { return numel / n + (c < numel % n ? 1 : 0); }
};

// Elements [begin, begin + count) of the contiguous tensor `t`, as a 1-d tensor sharing its
// storage (no autograd, no op tracing).
Tensor view_of(const Tensor& t, int64_t begin, int64_t count) {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = t.impl().storage;
  impl->offset = t.impl().offset + begin;
  impl->shape = {count};
  impl->dtype = t.dtype();
  return Tensor(std::move(impl));
}

TensorDescriptor descriptor(int64_t count, DType dtype) {
  return {{count}, dtype, static_cast<uint64_t>(count) * element_size(dtype), true};
}

uint64_t shape_hash(const Shape& shape) {
  uint64_t h = tensorplay::detail::kFnvOffsetBasis;
  for (int64_t d : shape) h = tensorplay::detail::fnv1a64_mix(h, static_cast<uint64_t>(d) + 0x9e37);
  return h;
}

std::string tensor_text(DType dtype, uint64_t numel) {
  return "a " + to_string(dtype) + " tensor of " + std::to_string(numel) + " elements";
}

// What one member passed, as the header of reduce-scatter step 0 carries it.
struct Header {
  uint32_t magic = kHeaderMagic;
  uint32_t dtype = 0;
  uint64_t numel = 0;
  uint64_t shape = 0;
  uint32_t members = 0;
  uint32_t unused = 0;
  bool operator==(const Header&) const = default;
};
static_assert(sizeof(Header) == kHeaderWords * 4);

struct Outcome {
  std::vector<Tensor> tensors;
  std::string error;
};

// Where the channel's callbacks (on its own thread) leave the receives' outcomes.
struct Mailbox {
  std::mutex mutex;
  std::condition_variable cv;
  std::optional<Outcome> data;    // the transfer awaited now
  std::optional<Outcome> status;  // the predecessor's status message
};

// One call of ring_all_reduce on one member.
class RingCall {
 public:
  RingCall(const RingGroup& group, uint64_t call, Tensor& flat)
      : group_(group),
        call_(call),
        flat_(flat),
        n_(static_cast<int>(group.peers.size())),
        me_(group.me),
        next_(group.peers[(group.me + 1) % n_]),
        prev_(group.peers[(group.me + n_ - 1) % n_]),
        chunks_{flat.numel(), n_},
        dtype_(flat.dtype()),
        element_(element_size(flat.dtype())),
        box_(std::make_shared<Mailbox>()) {
    header_.dtype = static_cast<uint32_t>(dtype_);
    header_.numel = static_cast<uint64_t>(flat.numel());
    header_.shape = shape_hash(flat.shape());
    header_.members = static_cast<uint32_t>(n_);
    prefix_ = "ring_all_reduce call " + std::to_string(call) + " on stream " +
              std::to_string(group.stream) + " (member " + std::to_string(me_) + " of " +
              std::to_string(n_) + ")";
  }

  void run() {
    post_status_receive();
    // Reduce-scatter: `outgoing` is what this member sends at the step.
    Tensor outgoing = chunk(me_);
    for (int s = 0; s + 1 < n_; ++s) {
      const int64_t c = wrap(me_ - 1 - s);
      const std::string what = "reduce-scatter step " + std::to_string(s);
      std::vector<Tensor> got =
          exchange(collective_key(group_.stream, call_, RingPhase::ReduceScatter, s), what,
                   outgoing, chunks_.size(c), s > 0, s == 0);
      if (s == 0) check_header(got.at(1));
      if (chunks_.size(c) > 0) add_own(c, got.at(0));
      outgoing = got.empty() ? Tensor() : got[0];
    }
    // `outgoing` holds the sum of chunk me+1 (undefined when that chunk is empty).
    place(wrap(me_ + 1), outgoing);
    for (int s = 0; s + 1 < n_; ++s) {
      const int64_t c = wrap(me_ - s);
      const std::string what = "all-gather step " + std::to_string(s);
      std::vector<Tensor> got =
          exchange(collective_key(group_.stream, call_, RingPhase::AllGather, s), what, outgoing,
                   chunks_.size(c), true, false);
      place(c, got.empty() ? Tensor() : got[0]);
      outgoing = got.empty() ? Tensor() : got[0];
    }
    send_status(kDone, {});
  }

 private:
  int64_t wrap(int64_t c) const { return ((c % n_) + n_) % n_; }
  Tensor chunk(int64_t c) const { return view_of(flat_, chunks_.begin(c), chunks_.size(c)); }

  std::string member(int index) const {
    return "member " + std::to_string(index) + " (channel rank " +
           std::to_string(group_.peers[index]) + ")";
  }
  std::string previous() const { return member((me_ + n_ - 1) % n_); }
  std::string self() const { return member(me_); }

  // -- one step -----------------------------------------------------------------------------------

  // Sends `outgoing` (plus the header at step 0) to the next member and receives `count`
  // elements (plus its header) from the one before; the tensors received, empty when the step
  // moves nothing (an empty chunk past step 0).
  std::vector<Tensor> exchange(const TransferKey& key, const std::string& what,
                               const Tensor& outgoing, int64_t count, bool delivered_before,
                               bool with_header) {
    const bool sends = outgoing.defined() && outgoing.numel() > 0;
    if (!with_header && !sends && count == 0) return {};
    std::vector<TensorDescriptor> expect{descriptor(count, dtype_)};
    if (with_header) expect.push_back(descriptor(kHeaderWords, DType::Float32));
    const Clock::time_point posted = Clock::now();
    try {
      if (with_header || count > 0) {
        group_.channel->post_receive(prev_, key, expect, cpu(), group_.timeout,
                                     [box = box_](std::vector<Tensor> t, std::string error) {
                                       {
                                         std::lock_guard lock(box->mutex);
                                         box->data = Outcome{std::move(t), std::move(error)};
                                       }
                                       box->cv.notify_all();
                                     });
      }
    } catch (const std::exception& e) {
      give_up(self() + " could not post the receive of " + what + " from " + previous() + ": " +
              e.what());
    }
    try {
      std::vector<Tensor> out;
      if (sends) out.push_back(outgoing);
      if (with_header) {
        if (!sends) out.push_back(empty({0}, {.dtype = dtype_, .device = cpu()}));
        out.push_back(header_tensor());
      }
      if (!out.empty()) group_.channel->send(next_, key, std::move(out));
    } catch (const std::exception& e) {
      cancel_receive(key);
      give_up(self() + " could not send " + what + " to " + member((me_ + 1) % n_) + ": " +
              e.what());
    }
    if (!with_header && count == 0) return {};
    return await(key, what, posted, delivered_before);
  }

  // Waits for the transfer `key` from the predecessor, or its reason for giving up.
  std::vector<Tensor> await(const TransferKey& key, const std::string& what,
                            Clock::time_point posted, bool delivered_before) {
    std::unique_lock lock(box_->mutex);
    auto ready = [&] { return box_->data.has_value() || gave_up_locked(); };
    if (!box_->cv.wait_until(lock, posted + group_.timeout + kLateTimer, ready)) {
      lock.unlock();
      cancel_receive(key);  // ends it with an error unless it just arrived
      lock.lock();
      if (!box_->cv.wait_for(lock, kLateTimer, ready)) {
        lock.unlock();
        give_up(self() + "'s channel did not end the receive of " + what + " from " + previous() +
                " after its timeout of " + std::to_string(group_.timeout.count()) + " ms");
      }
    }
    if (gave_up_locked()) {
      std::string reason = status_reason_locked();
      lock.unlock();
      cancel_receive(key);
      pass_on(reason);
    }
    Outcome got = std::move(*box_->data);
    box_->data.reset();
    if (got.error.empty()) return std::move(got.tensors);

    const bool timed_out = got.error.find(" within ") != std::string::npos;
    // A predecessor that delivered before is waiting for its own predecessor, most likely: its
    // reason for giving up is on the way.
    if (timed_out && delivered_before)
      box_->cv.wait_for(lock, std::min(group_.timeout, kLateTimer),
                        [&] { return gave_up_locked(); });
    if (gave_up_locked()) {
      std::string reason = status_reason_locked();
      lock.unlock();
      pass_on(reason);
    }
    lock.unlock();
    if (got.error.find("do not match") != std::string::npos)
      give_up(previous() + " passed a tensor of another size than " + self() + ", which passed " +
              tensor_text(dtype_, header_.numel) +
              " (or the two run groups of different sizes): " + got.error);
    if (timed_out)
      give_up(previous() + " did not deliver " + what + " of call " + std::to_string(call_) +
              " to " + self() + " within " + std::to_string(group_.timeout.count()) + " ms");
    give_up(self() + " could not receive " + what + " from " + previous() + ": " + got.error);
  }

  void cancel_receive(const TransferKey& key) noexcept {
    try {
      group_.channel->cancel_receive(prev_, key);
    } catch (const std::exception&) {  // the error that follows says what went wrong
    }
  }

  // -- header and status --------------------------------------------------------------------------

  Tensor header_tensor() const {
    Tensor t = empty({kHeaderWords}, {.dtype = DType::Float32, .device = cpu()});
    std::memcpy(t.raw_data(), &header_, sizeof header_);
    return t;
  }

  void check_header(const Tensor& received) {
    Header theirs;
    std::memcpy(&theirs, received.raw_data(), sizeof theirs);
    if (theirs == header_) return;
    const std::string who = previous();
    if (theirs.magic != kHeaderMagic || theirs.dtype > static_cast<uint32_t>(DType::BFloat16))
      give_up(who + " sent " + self() + " a header it cannot read (is it in ring_all_reduce?)");
    if (theirs.members != header_.members)
      give_up(who + " runs a group of " + std::to_string(theirs.members) + " members, " + self() +
              " one of " + std::to_string(header_.members));
    const DType their_dtype = static_cast<DType>(theirs.dtype);
    if (their_dtype != dtype_ || theirs.numel != header_.numel)
      give_up(who + " passed " + tensor_text(their_dtype, theirs.numel) + ", " + self() + " " +
              tensor_text(dtype_, header_.numel) + " (every member passes the same)");
    give_up(who + " passed a tensor of another shape than " + self() + "'s " +
            tensorplay::to_string(flat_.shape()) + " (the same " + std::to_string(header_.numel) +
            " " + to_string(dtype_) + " elements)");
  }

  void post_status_receive() {
    // It stays posted for the whole call: the longest a call may take is a timeout per step.
    const milliseconds patience = group_.timeout * (2 * n_) + kLateTimer;
    try {
      group_.channel->post_receive(prev_, status_tag(), {descriptor(kStatusFloats, DType::Float32)},
                                   cpu(), patience,
                                   [box = box_](std::vector<Tensor> t, std::string error) {
                                     {
                                       std::lock_guard lock(box->mutex);
                                       box->status = Outcome{std::move(t), std::move(error)};
                                     }
                                     box->cv.notify_all();
                                   });
    } catch (const std::exception& e) {
      give_up(self() + " could not post the receive of the status of " + previous() + ": " +
              e.what() + " (is call number " + std::to_string(call_) + " used twice?)");
    }
  }

  TransferKey status_tag() const {
    return collective_key(group_.stream, call_, RingPhase::AllGather, kStatusRingStep);
  }

  bool gave_up_locked() const {
    return box_->status && box_->status->error.empty() && !box_->status->tensors.empty() &&
           static_cast<const uint8_t*>(box_->status->tensors[0].raw_data())[0] == kGaveUp;
  }

  std::string status_reason_locked() const {
    const char* bytes = static_cast<const char*>(box_->status->tensors[0].raw_data());
    return std::string(bytes + 1, strnlen(bytes + 1, kStatusFloats * 4 - 1));
  }

  // Tells the next member that this one is done or gave up (best effort: it may be gone).
  void send_status(uint8_t code, const std::string& reason) noexcept {
    try {
      Tensor t = zeros({kStatusFloats}, {.dtype = DType::Float32, .device = cpu()});
      auto* bytes = static_cast<char*>(t.raw_data());
      bytes[0] = static_cast<char>(code);
      std::memcpy(bytes + 1, reason.data(), std::min<size_t>(reason.size(), kStatusFloats * 4 - 2));
      group_.channel->send(next_, status_tag(), {std::move(t)});
    } catch (const std::exception&) {  // this member's own error is what the caller hears
    }
  }

  // Ends this member's part of the call: tells the next member `reason`, drops the status
  // receive and throws `message`. Called without the mailbox's lock (cancelling waits for the
  // channel's thread, whose callbacks take it).
  [[noreturn]] void fail(const std::string& reason, const std::string& message) {
    send_status(kGaveUp, reason);
    cancel_receive(status_tag());
    throw TransferError(prefix_ + ": " + message);
  }
  // This member found what went wrong.
  [[noreturn]] void give_up(const std::string& reason) { fail(reason, reason); }
  // The member before gave up for `reason`: every member after it fails for the same one.
  [[noreturn]] void pass_on(const std::string& reason) {
    fail(reason, previous() + " gave up: " + reason);
  }

  // -- arithmetic ---------------------------------------------------------------------------------

  // partial += this member's chunk c (in float32; bfloat16 rounded once).
  void add_own(int64_t c, Tensor& partial) {
    const Backend& backend = backend_for(cpu());
    const int64_t count = chunks_.size(c);
    const int64_t one = 1;
    const char* own = static_cast<const char*>(flat_.raw_data()) + chunks_.begin(c) * element_;
    if (dtype_ == DType::Float32) {
      auto* sum = static_cast<float*>(partial.raw_data());
      backend.binary(BinaryOp::Add, reinterpret_cast<const float*>(own), &one, sum, &one, sum,
                     &count, 1);
      return;
    }
    if (!scratch_.defined())
      scratch_ = empty({2 * kBlock}, {.dtype = DType::Float32, .device = cpu()});
    float* a = static_cast<float*>(scratch_.raw_data());
    float* b = a + kBlock;
    auto* sum = static_cast<char*>(partial.raw_data());
    for (int64_t at = 0; at < count; at += kBlock) {
      const int64_t m = std::min(kBlock, count - at);
      backend.convert(own + at * element_, DType::BFloat16, a, DType::Float32, m);
      backend.convert(sum + at * element_, DType::BFloat16, b, DType::Float32, m);
      backend.binary(BinaryOp::Add, a, &one, b, &one, a, &m, 1);
      backend.convert(a, DType::Float32, sum + at * element_, DType::BFloat16, m);
    }
  }

  // Copies the sum of chunk c into place.
  void place(int64_t c, const Tensor& sum) {
    const int64_t count = chunks_.size(c);
    if (count == 0) return;
    std::memcpy(static_cast<char*>(flat_.raw_data()) + chunks_.begin(c) * element_, sum.raw_data(),
                count * element_);
  }

  const RingGroup& group_;
  const uint64_t call_;
  Tensor& flat_;
  const int n_;
  const int me_;
  const int next_;  // channel ranks
  const int prev_;
  const Chunks chunks_;
  const DType dtype_;
  const size_t element_;
  std::shared_ptr<Mailbox> box_;  // shared with the channel's callbacks, which may outlive us
  Header header_;
  std::string prefix_;
  Tensor scratch_;  // bfloat16 sums widened to float32
};

void check_group(const RingGroup& group, const Tensor& flat) {
  const std::string where = "ring_all_reduce: ";
  if (group.channel == nullptr) throw std::invalid_argument(where + "the group has no channel");
  const int n = static_cast<int>(group.peers.size());
  check_ring_members(n, where);
  if (group.me < 0 || group.me >= n)
    throw std::invalid_argument(where + "this member's index " + std::to_string(group.me) +
                                " is not one of the group's " + std::to_string(n) + " members");
  std::set<int> seen;
  for (int peer : group.peers) {
    if (peer < 0)
      throw std::invalid_argument(where + "the group lists channel rank " + std::to_string(peer));
    if (!seen.insert(peer).second)
      throw std::invalid_argument(where + "the group lists channel rank " + std::to_string(peer) +
                                  " twice");
  }
  if (group.timeout.count() <= 0)
    throw std::invalid_argument(where + "the timeout must be positive, got " +
                                std::to_string(group.timeout.count()) + " ms");
  if (!flat.defined()) throw std::invalid_argument(where + "the tensor is undefined");
  if (!flat.device().is_cpu())
    throw std::invalid_argument(where + "the tensor is on " + to_string(flat.device()) +
                                "; pass a host tensor (copy it with .cpu())");
  if (flat.dtype() != DType::Float32 && flat.dtype() != DType::BFloat16)
    throw std::invalid_argument(where + "sums float32 and bfloat16 tensors, not " +
                                to_string(flat.dtype()));
}

}  // namespace

void ring_all_reduce(const RingGroup& group, uint64_t call, Tensor& flat) {
  check_group(group, flat);
  if (group.peers.size() == 1) return;
  RingCall(group, call, flat).run();
}

void ring_all_reduce_staged(const RingGroup& group, uint64_t call, Tensor& tensor) {
  if (!tensor.is_cuda()) {
    ring_all_reduce(group, call, tensor);
    return;
  }
  Tensor host = tensor.detach().cpu();
  ring_all_reduce(group, call, host);
  tensor.copy_(host);
}

}  // namespace tensorplay::transport
