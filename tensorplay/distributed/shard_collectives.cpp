// ProcessGroup::all_gather_into_tensor and reduce_scatter_tensor: the members' shapes checked
// over the collectives' exchange, then each member's chunk sent straight to the member that
// needs it over UCX, under a collective key naming the sender; a Work waits for the arrivals.
#include <sstream>

#include "tensorplay/distributed/detail/group_runtime.h"
#include "tensorplay/distributed/detail/work_state.h"
#include "tensorplay/distributed/process_group.h"
#include "tensorplay/tensor.h"
#include "tensorplay/transport/channel.h"
#include "tensorplay/transport/collective_key.h"
#include "tensorplay/transport/tensor_descriptor.h"
#include "tensorplay/transport/ucx_channel.h"

namespace tensorplay::distributed {

// -- Work
// ------------------------------------------------------------------------------------------

void Work::wait() const {
  if (!state_) return;
  State& s = *state_;
  std::unique_lock lock(s.mutex);
  if (!s.cv.wait_until(lock, s.deadline, [&] { return s.waiting.empty() || !s.error.empty(); })) {
    std::string names;
    for (const auto& [member, who] : s.waiting) names += (names.empty() ? "" : ", ") + who;
    throw DistributedError(s.where + ": timed out after " + std::to_string(s.timeout.count()) +
                           " ms waiting for " + names + " (did every member call it?)");
  }
  if (!s.error.empty()) throw DistributedError(s.where + " failed: " + s.error);
  if (!s.finished) {
    s.finished = true;
    try {
      if (s.finish) s.finish();
    } catch (const std::exception& e) {
      s.finish_error = e.what();
    }
    s.finish = nullptr;
  }
  if (!s.finish_error.empty()) throw DistributedError(s.where + " failed: " + s.finish_error);
}

bool Work::is_completed() const {
  if (!state_) return true;
  std::lock_guard lock(state_->mutex);
  return state_->waiting.empty() || !state_->error.empty();
}

namespace {

/// What a member passed, as it travels in the shape check: "dtype|shape|dtype|shape".
std::string encode(const Tensor& input, const Tensor& output) {
  return to_string(input.dtype()) + "|" + to_string(input.shape()) + "|" +
         to_string(output.dtype()) + "|" + to_string(output.shape()) + "|" +
         std::to_string(input.numel()) + "|" + std::to_string(output.numel());
}

struct Passed {
  std::string in_dtype, in_shape, out_dtype, out_shape;
  int64_t in_numel = 0, out_numel = 0;
};

Passed decode(const std::string& bytes, const std::string& where) {
  std::vector<std::string> f;
  std::stringstream ss(bytes);
  for (std::string part; std::getline(ss, part, '|');) f.push_back(part);
  if (f.size() != 6) throw DistributedError(where + ": a member's shapes are cut short");
  return {f[0], f[1], f[2], f[3], std::stoll(f[4]), std::stoll(f[5])};
}

enum class Kind { AllGather, ReduceScatter };

/// Copies the one tensor received into `dst`: "" or why not.
std::string error_of_copy(Tensor dst, const std::vector<Tensor>& got) {
  if (got.size() != 1) return "expected one tensor, got " + std::to_string(got.size());
  try {
    dst.copy_(got[0]);
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

/// The same check on every member, over what every member passed: the same error everywhere.
void check_members(const std::vector<std::string>& got, Kind kind, const std::vector<int>& ranks,
                   const std::string& where) {
  const int64_t n = static_cast<int64_t>(got.size());
  std::vector<Passed> p;
  for (const auto& g : got) p.push_back(decode(g, where));
  auto who = [&](size_t j) {
    return "member " + std::to_string(j) + " (rank " + std::to_string(ranks[j]) + ")";
  };
  for (size_t j = 0; j < p.size(); ++j) {
    if (p[j].in_dtype != p[j].out_dtype)
      throw DistributedError(where + ": " + who(j) + " passed an input of " + p[j].in_dtype +
                             " and an output of " + p[j].out_dtype +
                             "; pass both of one dtype (convert with .to())");
    if (p[j].in_dtype != p[0].in_dtype || p[j].in_shape != p[0].in_shape)
      throw DistributedError(where + ": " + who(j) + " passed an input of shape " + p[j].in_shape +
                             " (" + p[j].in_dtype + "), " + who(0) + " one of " + p[0].in_shape +
                             " (" + p[0].in_dtype +
                             "); every member passes the same shape and dtype");
    const bool gather = kind == Kind::AllGather;
    const int64_t expect = gather ? n * p[j].in_numel : p[j].in_numel;
    const int64_t have = gather ? p[j].out_numel : n * p[j].out_numel;
    if (expect != have)
      throw DistributedError(
          where + ": " + who(j) + " passed an output of shape " + p[j].out_shape +
          " for an input of shape " + p[j].in_shape + "; the " + (gather ? "output" : "input") +
          " must hold " + std::to_string(n) + " (the group's size) times the elements of the " +
          (gather ? "input" : "output") + " (dim 0 " + std::to_string(n) + " times as long)");
  }
}

/// Every member's encoded input and output, by group rank (the collectives' exchange, named).
std::vector<std::string> exchange_shapes(detail::GroupRuntime& c, const std::vector<int>& ranks,
                                         const std::string& bytes, const std::string& where) {
  std::vector<std::string> out;
  const std::string what = where.substr(0, where.find(' '));  // the collective's name
  for (auto& got : c.exchange(ranks, bytes, {}, what)) out.push_back(std::move(got.bytes));
  return out;
}

/// A state waiting for every member but `me` of the group of global `ranks`.
std::shared_ptr<Work::State> new_state(detail::GroupRuntime& c, const std::string& where,
                                       const std::vector<int>& ranks, int me) {
  auto s = std::make_shared<Work::State>();
  s->where = where;
  s->timeout = c.timeout();
  s->deadline = std::chrono::steady_clock::now() + c.timeout();
  for (int j = 0; j < static_cast<int>(ranks.size()); ++j)
    if (j != me) s->waiting[j] = c.describe(ranks[j]);
  return s;
}

transport::TensorDescriptor row_descriptor(DType dtype, int64_t m) {
  return {.shape = {1, m}, .dtype = dtype, .bytes = static_cast<uint64_t>(m) * element_size(dtype)};
}

/// Rows of `rows` summed in order (in float32), divided by their count for Avg.
Tensor reduce_rows(const std::vector<Tensor>& rows, int64_t m, ReduceOp op) {
  std::vector<float> acc(static_cast<size_t>(m), 0.0f);
  for (const Tensor& row : rows) {
    if (row.dtype() == DType::Float32) {
      const float* p = row.data<float>();
      for (int64_t i = 0; i < m; ++i) acc[i] += p[i];
    } else {
      const uint16_t* p = row.data<uint16_t>();
      for (int64_t i = 0; i < m; ++i) acc[i] += bfloat16_to_float(p[i]);
    }
  }
  if (op == ReduceOp::Avg)
    for (float& v : acc) v /= static_cast<float>(rows.size());
  return from_vector(acc, {m});
}

// What both collectives check before they move anything: defined tensors, and, in a group of more
// than this rank, a UCX channel, a ring's member count and every member's shapes. A group of this
// rank alone checks the shapes and copies the input to the output: run_alone returns true then.
void check_defined(const Tensor& input, const Tensor& output, const char* name) {
  if (!input.defined() || !output.defined())
    throw std::invalid_argument(std::string(name) + ": the input or output is undefined");
}

bool run_alone(const std::vector<int>& ranks, int global_rank, const Tensor& input, Tensor& output,
               Kind kind, const std::string& where) {
  if (ranks.size() != 1 || ranks[0] != global_rank) return false;
  check_members({encode(input, output)}, kind, ranks, where);
  output.copy_(input.detach().reshape(output.shape()));
  return true;
}

void check_before_exchange(detail::GroupRuntime& c, const std::vector<int>& ranks,
                           const Tensor& input, const Tensor& output, Kind kind,
                           const std::string& where) {
  if (!c.ucx()) throw DistributedError(where + ": this process has no UCX channel to the others");
  transport::check_ring_members(static_cast<int>(ranks.size()) + 1, where);
  check_members(exchange_shapes(c, ranks, encode(input, output), where), kind, ranks, where);
}

}  // namespace

// -- all_gather_into_tensor
// -------------------------------------------------------------------------

Work ProcessGroup::all_gather_into_tensor_async(Tensor& output, const Tensor& input) const {
  check_defined(input, output, "all_gather_into_tensor");
  const std::string where = "all_gather_into_tensor on group " + detail::join_ranks(ranks_);
  if (run_alone(ranks_, global_rank(), input, output, Kind::AllGather, where)) return Work();
  detail::GroupRuntime& c = member_runtime("all_gather_into_tensor");
  check_before_exchange(c, ranks_, input, output, Kind::AllGather, where);
  const int n = size(), me = rank();
  const int64_t m = input.numel();
  Tensor mine = input.detach().cpu().reshape({1, m});
  Tensor host_out = output.device().is_cpu()
                        ? output.detach()
                        : empty(output.shape(), {.dtype = output.dtype(), .device = cpu()});
  Tensor rows = host_out.reshape({n, m});
  rows.slice0(me, me + 1).copy_(mine);
  auto state = new_state(c, where, ranks_, me);
  if (!output.device().is_cpu())
    state->finish = [output, host_out]() mutable { output.copy_(host_out); };
  if (m == 0) {
    state->waiting.clear();
    return Work(state);
  }
  const uint32_t stream = c.collective_stream(ranks_);
  const uint64_t call = c.next_collective_call(ranks_);
  auto key = [&](int sender) {
    return transport::collective_key(stream, call, transport::RingPhase::AllGather, sender);
  };
  try {
    for (int j = 0; j < n; ++j)
      if (j != me) c.ucx()->send(ranks_[j], key(me), {mine});
    for (int j = 0; j < n; ++j) {
      if (j == me) continue;
      c.ucx()->post_receive(ranks_[j], key(j), {row_descriptor(input.dtype(), m)}, cpu(),
                            c.timeout(), [state, rows, j](std::vector<Tensor> got, std::string e) {
                              if (e.empty()) e = error_of_copy(rows.slice0(j, j + 1), got);
                              state->arrived(j, e);
                            });
    }
  } catch (const transport::TransferError& e) {
    throw DistributedError(where + " failed: " + e.what());
  }
  return Work(state);
}

void ProcessGroup::all_gather_into_tensor(Tensor& output, const Tensor& input) const {
  all_gather_into_tensor_async(output, input).wait();
}

// -- reduce_scatter_tensor
// --------------------------------------------------------------------------

Work ProcessGroup::reduce_scatter_tensor_async(Tensor& output, const Tensor& input,
                                               ReduceOp op) const {
  check_defined(input, output, "reduce_scatter_tensor");
  const std::string where = "reduce_scatter_tensor on group " + detail::join_ranks(ranks_);
  if (run_alone(ranks_, global_rank(), input, output, Kind::ReduceScatter, where)) return Work();
  detail::GroupRuntime& c = member_runtime("reduce_scatter_tensor");
  check_before_exchange(c, ranks_, input, output, Kind::ReduceScatter, where);
  const int n = size(), me = rank();
  const int64_t m = output.numel();
  Tensor flat = input.detach().cpu().reshape({n, m});
  auto got = std::make_shared<std::vector<Tensor>>(n);
  (*got)[me] = flat.slice0(me, me + 1);
  auto state = new_state(c, where, ranks_, me);
  state->finish = [got, m, op, output]() mutable {
    output.copy_(reduce_rows(*got, m, op).reshape(output.shape()));
  };
  if (m == 0) {
    state->waiting.clear();
    return Work(state);
  }
  const uint32_t stream = c.collective_stream(ranks_);
  const uint64_t call = c.next_collective_call(ranks_);
  auto key = [&](int sender) {
    return transport::collective_key(stream, call, transport::RingPhase::ReduceScatter, sender);
  };
  try {
    for (int j = 0; j < n; ++j)
      if (j != me) c.ucx()->send(ranks_[j], key(me), {flat.slice0(j, j + 1)});
    for (int j = 0; j < n; ++j) {
      if (j == me) continue;
      c.ucx()->post_receive(ranks_[j], key(j), {row_descriptor(input.dtype(), m)}, cpu(),
                            c.timeout(), [state, got, j](std::vector<Tensor> t, std::string e) {
                              if (e.empty() && t.size() == 1) (*got)[j] = std::move(t[0]);
                              if (e.empty() && !(*got)[j].defined()) e = "no tensor came";
                              state->arrived(j, e);
                            });
    }
  } catch (const transport::TransferError& e) {
    throw DistributedError(where + " failed: " + e.what());
  }
  return Work(state);
}

void ProcessGroup::reduce_scatter_tensor(Tensor& output, const Tensor& input, ReduceOp op) const {
  reduce_scatter_tensor_async(output, input, op).wait();
}

}  // namespace tensorplay::distributed
