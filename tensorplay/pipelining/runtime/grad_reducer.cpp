// Data-parallel gradient averaging: buckets built per stage, handed over by gradient hooks and
// dw_builder runners, all-reduced in bucket order on one thread.
#include "tensorplay/pipelining/runtime/detail/grad_reducer.h"

#include <pthread.h>

#include <algorithm>
#include <bit>
#include <set>
#include <stdexcept>

#include "tensorplay/core/autograd/grad_mode.h"
#include "tensorplay/core/backend.h"
#include "tensorplay/core/ops/elementwise.h"

namespace tensorplay::pipelining::detail {

namespace {

double ms_between(std::chrono::steady_clock::time_point a,
                  std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

/// All-reduces run per dtype and device: the group a tensor belongs to.
using Group = std::pair<int, std::string>;
Group group_of(const Tensor& t) { return {static_cast<int>(t.dtype()), to_string(t.device())}; }

/// The slices of `flat` that hold `tensors` end to end, each shaped as its tensor.
std::vector<Tensor> slices(const Tensor& flat, const std::vector<Tensor>& tensors) {
  std::vector<Tensor> out;
  int64_t off = 0;
  for (const Tensor& t : tensors) {
    out.push_back(flat.slice0(off, off + t.numel()).reshape(t.shape()));
    off += t.numel();
  }
  return out;
}

/// Writes `param`'s gradient times `share` into `part` in one pass, or zeros when this replica
/// has no gradient for it (DDP's unused parameters).
void pack_gradient(Tensor& part, const Tensor& param, float share) {
  const Tensor g = param.grad();
  if (!g.defined()) {
    part.zero_();
  } else if (!part.is_cuda() && !g.is_cuda() && part.dtype() == DType::Float32 &&
             g.dtype() == DType::Float32) {
    backend_for(cpu()).affine(g.data<float>(), part.data<float>(), g.numel(), share, 0.0f);
  } else {
    part.copy_(affine(g, share, 0.0f));
  }
}

}  // namespace

uint64_t GradReducer::call_of(size_t job) const {
  // Numbered alike on every replica (the steps are), one number per job. A collective's key
  // keeps the call modulo transport::kCallWindow (tensorplay/transport/collective_key.h): what a
  // failed step leaves in flight can match only a call kCallWindow jobs later, never a later step's
  // same bucket in practice.
  return step_ * stride_ + job;
}

struct GradReducer::Bucket {
  size_t index = 0;            // in buckets_ (the order replicas run them in)
  size_t stage = 0;            // index into stages_
  std::vector<Tensor> params;  // in bucket order
  int64_t numel = 0;
  DType dtype = DType::Float32;
  Device device;
  Tensor flat;
  // Per step, on the stage's thread: parameters whose gradients are not final yet.
  size_t pending = 0;
  bool handed = false;
};

struct GradReducer::StageState {
  std::vector<Tensor> params;     // by slot
  std::vector<size_t> bucket_of;  // slot -> bucket
  std::vector<int> hits;          // accumulations in the current action, by slot
  std::vector<int> expected;      // accumulations per action (-1: not learnt yet)
  int actions_done = 0;           // W (or B) actions of the current step
  std::vector<size_t> buckets;    // this stage's buckets, in order
  bool late = false;              // a gradient came after its bucket was handed over
  std::string late_name;
  std::vector<std::string> names;  // by slot
};

std::unique_ptr<GradReducer::StageState> GradReducer::bucket_stage(
    size_t si, std::set<const TensorImpl*>& seen) {
  PipelineStage* stage = stages_[si];
  auto st = std::make_unique<StageState>();
  std::set<std::string> tied;
  for (const auto& [tie, holders] : stage->tied_parameters()) tied.insert(tie);
  for (const auto& [pname, p] : stage->module().named_parameters()) {
    if (!p.requires_grad() || tied.count(pname) || !seen.insert(p.impl_ptr().get()).second)
      continue;
    st->params.push_back(p);
    st->names.push_back(pname);
  }
  const size_t n = st->params.size();
  st->bucket_of.assign(n, 0);
  st->hits.assign(n, 0);
  st->expected.assign(n, -1);
  // Reverse registration order: the backward reaches the last layers first.
  Bucket* open = nullptr;
  int64_t open_bytes = 0;
  for (size_t k = n; k-- > 0;) {
    const Tensor& p = st->params[k];
    const int64_t bytes = static_cast<int64_t>(p.nbytes());
    if (!open || open->dtype != p.dtype() || open->device != p.device() ||
        (open_bytes > 0 && open_bytes + bytes > options_.bucket_cap_bytes)) {
      buckets_.push_back(std::make_unique<Bucket>());
      open = buckets_.back().get();
      open->index = buckets_.size() - 1;
      open->stage = si;
      open->dtype = p.dtype();
      open->device = p.device();
      open_bytes = 0;
      st->buckets.push_back(buckets_.size() - 1);
    }
    open->params.push_back(p);
    open->numel += p.numel();
    open_bytes += bytes;
    st->bucket_of[k] = buckets_.size() - 1;
  }
  return st;
}

void GradReducer::attach_hooks() {
  for (size_t si = 0; si < stages_.size(); ++si) {
    StageState& st = *stage_state_[si];
    for (size_t k = 0; k < st.params.size(); ++k) {
      uint64_t id = st.params[k].register_post_accumulate_grad_hook(
          [this, si, k](const Tensor&) { on_accumulate(si, k); });
      hooks_.emplace_back(st.params[k], id);
    }
    stages_[si]->set_runtime_dw_builder(
        [this, si]() -> DwRunner { return [this, si] { on_action_done(si); }; });
  }
}

GradReducer::GradReducer(std::vector<PipelineStage*> stages, int n_microbatches, int dp_size,
                         DataParallelOptions options, FlatAllReduce all_reduce, std::string name)
    : stages_(std::move(stages)),
      n_microbatches_(n_microbatches),
      dp_size_(dp_size),
      options_(options),
      all_reduce_(std::move(all_reduce)),
      name_(std::move(name)) {
  if (options_.bucket_cap_bytes < 1)
    throw std::invalid_argument(name_ +
                                ": DataParallelOptions::bucket_cap_bytes must be positive, got " +
                                std::to_string(options_.bucket_cap_bytes));
  // Later stages finish their backward first: their buckets come first.
  std::vector<size_t> order(stages_.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return stages_[a]->stage_index() > stages_[b]->stage_index();
  });
  stage_state_.resize(stages_.size());
  std::set<const TensorImpl*> seen;  // a tensor two local stages share is averaged once
  for (size_t si : order) stage_state_[si] = bucket_stage(si, seen);
  for (auto& b : buckets_) b->flat = empty({b->numel}, {.dtype = b->dtype, .device = b->device});
  attach_hooks();
  // The tied parameters' all-reduces follow the buckets, one per dtype and device.
  std::set<Group> tied_groups;
  for (PipelineStage* stage : stages_)
    for (const auto& [tie, holders] : stage->tied_parameters())
      if (Tensor p = stage->module().find_tensor(tie); p.defined()) tied_groups.insert(group_of(p));
  stride_ = std::bit_ceil(std::max<size_t>(buckets_.size() + tied_groups.size(), 1));
  thread_ = std::thread([this] { run(); });
}

GradReducer::~GradReducer() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
  for (PipelineStage* s : stages_) s->set_runtime_dw_builder(nullptr);
  for (auto& [p, id] : hooks_) p.remove_post_accumulate_grad_hook(id);
}

std::string GradReducer::layout() const {
  std::string out;
  for (const auto& b : buckets_)
    out += std::to_string(stages_[b->stage]->stage_index()) + ":" + std::to_string(b->numel) + ":" +
           to_string(b->dtype) + ",";
  return out;
}

void GradReducer::broadcast_from_first(bool is_first) {
  NoGradGuard no_grad;
  // Every float parameter and buffer, one all-reduce per dtype and device (in step 0, which no
  // step uses).
  std::map<Group, std::vector<Tensor>> groups;
  for (PipelineStage* s : stages_) {
    auto tensors = s->module().named_parameters();
    auto buffers = s->module().named_buffers();
    tensors.insert(tensors.end(), buffers.begin(), buffers.end());
    for (auto& [tname, t] : tensors)
      if (t.dtype() == DType::Float32 || t.dtype() == DType::BFloat16)
        groups[group_of(t)].push_back(t.detach());
  }
  uint64_t call = 0;
  for (auto& [key, tensors] : groups) {
    int64_t total = 0;
    for (const Tensor& t : tensors) total += t.numel();
    Tensor flat = zeros({total}, {.dtype = tensors[0].dtype(), .device = tensors[0].device()});
    std::vector<Tensor> parts = slices(flat, tensors);
    if (is_first)
      for (size_t i = 0; i < tensors.size(); ++i) parts[i].copy_(tensors[i]);
    all_reduce_(flat, call++);
    for (size_t i = 0; i < tensors.size(); ++i) tensors[i].copy_(parts[i]);
  }
}

void GradReducer::begin_step(uint64_t step, bool sync,
                             std::map<std::string, std::vector<Tensor>> tied) {
  std::lock_guard lock(mutex_);
  step_ = step;
  active_ = sync;
  stats_ = {};
  stats_.synced = sync;
  error_.clear();
  abandon_ = false;
  tied_ = sync ? std::move(tied) : std::map<std::string, std::vector<Tensor>>{};
  jobs_ = sync ? buckets_.size() + (tied_.empty() ? 0 : 1) : 0;
  ready_.assign(jobs_, false);
  next_ = done_ = 0;
  for (auto& b : buckets_) {
    b->pending = b->params.size();
    b->handed = false;
  }
  // A replica that already reported this step failed takes no part: fail at the end at once.
  peer_failures_.erase(peer_failures_.begin(),
                       peer_failures_.lower_bound(step > 64 ? step - 64 : 0));
  if (auto it = peer_failures_.find(step); sync && it != peer_failures_.end()) {
    error_ = it->second;
    abandon_ = true;
  }
  for (auto& st : stage_state_) {
    std::fill(st->hits.begin(), st->hits.end(), 0);
    st->actions_done = 0;
    st->late = false;
  }
}

void GradReducer::on_accumulate(size_t stage, size_t slot) {
  if (!active_ || !options_.overlap) return;  // set before the step's actors start
  StageState& st = *stage_state_[stage];
  const int hits = ++st.hits[slot];
  Bucket& b = *buckets_[st.bucket_of[slot]];
  if (b.handed) {
    st.late = true;
    st.late_name = st.names[slot];
    return;
  }
  // The stage's last action of the step: a parameter is final once it has had as many
  // accumulations as every action gives it.
  if (st.actions_done == n_microbatches_ - 1 && st.expected[slot] > 0 &&
      hits == st.expected[slot] && --b.pending == 0)
    hand_over(st.bucket_of[slot]);
}

void GradReducer::on_action_done(size_t stage) {
  if (!active_) return;
  StageState& st = *stage_state_[stage];
  for (size_t k = 0; k < st.hits.size(); ++k) {
    if (st.expected[k] < 0) st.expected[k] = st.hits[k];
    st.hits[k] = 0;
  }
  if (++st.actions_done < n_microbatches_ || !options_.overlap) return;
  for (size_t b : st.buckets)
    if (!buckets_[b]->handed) hand_over(b);
}

void GradReducer::hand_over(size_t bucket) {
  buckets_[bucket]->handed = true;
  {
    std::lock_guard lock(mutex_);
    ready_.at(bucket) = true;
    ++stats_.buckets_overlapped;
  }
  cv_.notify_all();
}

void GradReducer::finish_step(std::chrono::steady_clock::time_point deadline) {
  if (!active_) return;
  std::unique_lock lock(mutex_);
  backward_done_ = std::chrono::steady_clock::now();
  for (size_t i = 0; i < buckets_.size(); ++i) {
    buckets_[i]->handed = true;
    ready_[i] = true;
  }
  if (!tied_.empty()) ready_.back() = true;
  cv_.notify_all();
  // A failed all-reduce ends the step's averaging: the replicas' calls no longer pair up.
  const bool finished =
      cv_.wait_until(lock, deadline, [&] { return done_ == jobs_ || !error_.empty(); });
  stats_.exposed_ms = ms_between(backward_done_, std::chrono::steady_clock::now());
  active_ = false;
  std::string late;
  for (size_t si = 0; si < stage_state_.size(); ++si)
    if (stage_state_[si]->late)
      late = "stage " + std::to_string(stages_[si]->stage_index()) + "'s parameter '" +
             stage_state_[si]->late_name + "'";
  if (!finished) {
    abandon_ = true;
    throw PipelineError(name_ + ": step " + std::to_string(step_) +
                        ": the data-parallel gradient all-reduce did not finish in time (" +
                        std::to_string(done_) + " of " + std::to_string(jobs_) +
                        " buckets done); a replica in the dp group is slow or gone");
  }
  if (!error_.empty())
    throw PipelineError(name_ + ": step " + std::to_string(step_) +
                        ": data-parallel gradient averaging failed: " + error_ +
                        " (gradients of this step are partial: zero_grad before retrying)");
  if (!late.empty())
    throw PipelineError(name_ + ": step " + std::to_string(step_) + ": " + late +
                        " got a gradient after its bucket was averaged (its stage's backward "
                        "accumulates into it a varying number of times); set "
                        "DataParallelOptions::overlap = false for this model");
}

void GradReducer::abandon_step(const std::function<void()>& cancel) {
  std::unique_lock lock(mutex_);
  active_ = false;
  abandon_ = true;
  cv_.notify_all();
  lock.unlock();
  if (cancel) cancel();
  lock.lock();
  // The running all-reduce ends with an error once its transfers are cancelled.
  cv_.wait_for(lock, std::chrono::seconds(2), [&] { return !running_; });
}

bool GradReducer::peer_failed(uint64_t step, const std::string& why) {
  std::lock_guard lock(mutex_);
  peer_failures_.emplace(step, why);
  if (step != step_ || !active_) return false;
  if (error_.empty()) error_ = why;
  abandon_ = true;
  cv_.notify_all();
  return true;
}

DataParallelStats GradReducer::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

void GradReducer::run() {
  pthread_setname_np(pthread_self(), "tp-allreduce");  // named for thread listings
  std::unique_lock lock(mutex_);
  for (;;) {
    cv_.wait(lock, [&] { return stop_ || (!abandon_ && next_ < jobs_ && ready_[next_]); });
    if (stop_) return;
    const size_t job = next_;
    const uint64_t job_step = step_;
    running_ = true;
    lock.unlock();
    std::string error;
    const auto t0 = std::chrono::steady_clock::now();
    try {
      if (job < buckets_.size())
        reduce_bucket(*buckets_[job]);
      else
        reduce_tied();
    } catch (const std::exception& e) {
      error = e.what();
    }
    const double took = ms_between(t0, std::chrono::steady_clock::now());
    lock.lock();
    running_ = false;
    cv_.notify_all();
    if (step_ != job_step) continue;  // an abandoned step's job ended after the next began
    stats_.all_reduce_ms += took;
    ++stats_.buckets;
    if (!error.empty() && error_.empty()) error_ = error;
    next_ = job + 1;
    done_ = job + 1;
    // After a failure the replicas' calls no longer match: the rest of the step is dropped.
    if (!error.empty()) abandon_ = true;
    cv_.notify_all();
  }
}

void GradReducer::reduce_bucket(Bucket& b) {
  NoGradGuard no_grad;
  std::vector<Tensor> parts = slices(b.flat, b.params);
  // Each gradient enters the bucket divided by the replicas (as DDP pre-divides).
  for (size_t i = 0; i < b.params.size(); ++i)
    pack_gradient(parts[i], b.params[i], 1.0f / static_cast<float>(dp_size_));
  all_reduce_(b.flat, call_of(b.index));
  // The mean stays in the bucket: each .grad becomes its view (DDP's gradient_as_bucket_view),
  // where later accumulations (no_sync, or steps without zero_grad) add in place.
  for (size_t i = 0; i < b.params.size(); ++i) b.params[i].set_grad(parts[i]);
  std::lock_guard lock(mutex_);
  stats_.bytes += static_cast<int64_t>(b.flat.nbytes());
}

void GradReducer::reduce_tied() {
  NoGradGuard no_grad;
  // One copy per tie (the schedule has summed the copies: they are equal), one all-reduce per
  // dtype and device, in name order on every replica.
  uint64_t call = call_of(buckets_.size());
  std::map<Group, std::vector<std::string>> groups;
  for (const auto& [tie, copies] : tied_) groups[group_of(copies.at(0))].push_back(tie);
  for (const auto& [key, ties] : groups) {
    std::vector<Tensor> firsts;
    int64_t total = 0;
    for (const std::string& t : ties) {
      firsts.push_back(tied_.at(t)[0]);
      total += firsts.back().numel();
    }
    Tensor flat = empty({total}, {.dtype = firsts[0].dtype(), .device = firsts[0].device()});
    std::vector<Tensor> parts = slices(flat, firsts);
    for (size_t i = 0; i < firsts.size(); ++i) pack_gradient(parts[i], firsts[i], 1.0f);
    all_reduce_(flat, call++);
    std::vector<Tensor> means =
        slices(affine(flat, 1.0f / static_cast<float>(dp_size_), 0.0f), firsts);
    for (size_t i = 0; i < ties.size(); ++i)
      for (Tensor copy : tied_.at(ties[i])) {
        if (copy.grad().defined())
          copy.grad().copy_(means[i]);
        else
          copy.set_grad(means[i].clone());
      }
    std::lock_guard lock(mutex_);
    stats_.bytes += static_cast<int64_t>(flat.nbytes());
  }
}

}  // namespace tensorplay::pipelining::detail
