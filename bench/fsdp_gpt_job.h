// The sharded-data-parallel benchmarks' job: a small GPT trained with AdamW on dp ranks joined in
// this process (one thread each, UCX over shared memory), sharded with fully_shard (blocks, then
// the root, with prefetch) or replicated (the gradients averaged in one all-reduce), with each
// rank's state bytes and step times.
#pragma once

#include <algorithm>
#include <chrono>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "gpt_memory_job.h"  // median
#include "tensorplay/distributed.h"
#include "tensorplay/nn.h"
#include "tensorplay/optim.h"
#include "tensorplay/tensor.h"

namespace bench {

struct FsdpJob {
  int dp = 4;
  bool sharded = true;
  int steps = 6;  ///< the first is warm-up
  int64_t width = 128, layers = 4, heads = 4, vocab = 512, context = 32, batch = 4;
};

/// What one rank measured.
struct FsdpRankFigures {
  size_t param_bytes = 0, grad_bytes = 0, optimizer_bytes = 0;
  std::vector<double> step_seconds;  ///< after the warm-up step
  std::string error;
  size_t state_bytes() const { return param_bytes + grad_bytes + optimizer_bytes; }
};

/// The replicated side's averaging: every gradient in one flat all-reduce, divided by dp.
inline void average_gradients(const std::vector<tensorplay::Tensor>& params,
                              const tensorplay::distributed::ProcessGroup& group) {
  namespace tp = tensorplay;
  int64_t total = 0;
  for (const auto& p : params) total += p.grad().numel();
  tp::Tensor flat = tp::empty({total});
  int64_t at = 0;
  for (const auto& p : params) {
    flat.slice0(at, at + p.grad().numel()).copy_(p.grad().reshape({p.grad().numel()}));
    at += p.grad().numel();
  }
  group.all_reduce(flat);
  std::vector<float> v = flat.to_vector();
  for (float& x : v) x /= static_cast<float>(group.size());
  at = 0;
  for (const auto& p : params) {
    tp::Tensor g = p.grad();
    g.copy_(
        tp::from_vector(std::vector<float>(v.begin() + at, v.begin() + at + g.numel()), g.shape()));
    at += g.numel();
  }
}

inline FsdpRankFigures run_fsdp_rank(const FsdpJob& job, tensorplay::distributed::ProcessGroup g) {
  namespace tp = tensorplay;
  namespace fsdp = tensorplay::distributed::fsdp;
  FsdpRankFigures out;
  tp::nn::GPT gpt(tp::nn::GPTConfig{.vocab_size = job.vocab,
                                    .context_length = job.context,
                                    .n_layer = job.layers,
                                    .n_head = job.heads,
                                    .width = job.width});
  if (job.sharded) {
    std::vector<fsdp::FSDPModule> blocks;
    for (const auto& block : *gpt->blocks) blocks.push_back(fsdp::fully_shard(block, {.mesh = g}));
    fsdp::fully_shard(gpt, {.mesh = g});
    for (size_t i = 0; i + 1 < blocks.size(); ++i) {
      blocks[i].set_modules_to_forward_prefetch({blocks[i + 1]});
      blocks[i + 1].set_modules_to_backward_prefetch({blocks[i]});
    }
  }
  tp::optim::AdamW opt(gpt->parameters(), {.lr = 1e-3f});
  std::vector<float> ids(static_cast<size_t>(job.batch * job.context));
  for (size_t i = 0; i < ids.size(); ++i)
    ids[i] = static_cast<float>((i * 7 + g.rank() * 13) % job.vocab);
  const tp::Tensor x = tp::from_vector(ids, {job.batch, job.context});
  const tp::Tensor y = tp::from_vector(ids, {job.batch * job.context});
  for (int step = 0; step < job.steps; ++step) {
    g.barrier();
    const auto t0 = std::chrono::steady_clock::now();
    opt.zero_grad();
    tp::Tensor logits = gpt(x).reshape({job.batch * job.context, job.vocab});
    tp::cross_entropy(logits, y).backward();
    if (!job.sharded) average_gradients(gpt->parameters(), g);
    opt.step();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (step > 0) out.step_seconds.push_back(s);
  }
  for (const auto& p : gpt->parameters()) {
    out.param_bytes += p.nbytes();
    if (p.grad().defined()) out.grad_bytes += p.grad().nbytes();
  }
  for (const auto& [name, t] : opt.state_dict())
    if (name.rfind("state.", 0) == 0) out.optimizer_bytes += t.nbytes();
  return out;
}

/// Runs the job on job.dp ranks (threads); throws the first rank's error.
inline std::vector<FsdpRankFigures> run_fsdp_job(const FsdpJob& job) {
  namespace dist = tensorplay::distributed;
  const int port = dist::free_loopback_port();
  std::vector<FsdpRankFigures> out(job.dp);
  std::vector<std::optional<dist::ProcessGroup>> groups(job.dp);
  std::vector<std::thread> threads;
  for (int r = 0; r < job.dp; ++r)
    threads.emplace_back([&, r] {
      try {
        groups[r] = dist::join_job({.backend = "ucx",
                                    .timeout = std::chrono::seconds(120),
                                    .env = dist::loopback_launch_env(r, job.dp, port)});
        out[r] = run_fsdp_rank(job, *groups[r]);
      } catch (const std::exception& e) {
        out[r].error = e.what();
      }
    });
  for (auto& t : threads) t.join();
  for (int r = 0; r < job.dp; ++r)
    if (!out[r].error.empty())
      throw std::runtime_error("rank " + std::to_string(r) + ": " + out[r].error);
  return out;
}

}  // namespace bench
