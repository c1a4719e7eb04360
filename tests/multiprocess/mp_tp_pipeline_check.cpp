// One rank of a {pp, dp, tp} check, started by tp-launch: the GPT or the Llama cut into pipeline
// stages by hand (nn::ModelStage), each stage split by its model's tensor-parallel plan over the
// mesh's "tp" dimension, trains 3 AdamW steps under 1F1B, Interleaved1F1B and ZBVZeroBubble, with
// and without sequence parallelism and loss parallel; every microbatch's loss and every parameter
// must equal the unsplit model's (its tp share) within float32 rounding. --misuse tp-mismatch:
// the last rank builds a mesh of another tp degree, and every rank must refuse it.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "tensorplay/distributed/init_device_mesh.h"
#include "tensorplay/distributed/process_group.h"
#include "tensorplay/distributed/tensor_parallel/detail/shard.h"
#include "tensorplay/distributed/tensor_parallel/loss_parallel.h"
#include "tensorplay/distributed/tensor_parallel/model_plans.h"
#include "tensorplay/distributed/tensor_parallel/parallelize_stage.h"
#include "tensorplay/nn.h"
#include "tensorplay/optim.h"
#include "tensorplay/pipelining/build_stage.h"
#include "tensorplay/pipelining/recompute.h"
#include "tensorplay/pipelining/runtime/schedule.h"
#include "tensorplay/tensor.h"

namespace tp = tensorplay;
namespace pp = tensorplay::pipelining;
namespace sc = tensorplay::schedules;
namespace dist = tensorplay::distributed;
namespace tpar = tensorplay::distributed::tensor_parallel;

namespace {

constexpr int64_t kVocab = 16, kTime = 8, kWidth = 32, kRows = 2;
constexpr int kMicrobatches = 4, kSteps = 3;
constexpr float kLossTolerance = 1e-5f, kParamTolerance = 2e-5f;
// AdamW divides by sqrt(v) + eps: at PyTorch's eps (1e-8) an element whose gradient is a
// cancellation near zero turns its rounding (which differs between any two summation orders)
// into a step of up to lr; eps 1e-6 keeps the comparison to what the split itself rounds.
constexpr float kAdamEps = 1e-6f;

struct Args {
  std::string model = "gpt";
  int dp = 1, tp = 2;
  std::string misuse;
  std::string recompute = "none";  // every stage's policy (the reference never recomputes)
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--model")
      a.model = value;
    else if (flag == "--dp")
      a.dp = std::atoi(value.c_str());
    else if (flag == "--tp")
      a.tp = std::atoi(value.c_str());
    else if (flag == "--misuse")
      a.misuse = value;
    else if (flag == "--recompute")
      a.recompute = value;
    else
      throw std::invalid_argument("unknown flag " + flag);
  }
  return a;
}

struct Variant {
  bool sequence_parallel = false, loss_parallel = false;
  std::string name() const {
    return std::string(sequence_parallel ? "sequence parallel" : "no sequence parallel") +
           (loss_parallel ? ", loss parallel" : "");
  }
};

// A GPT (tied embeddings, 4 heads) or a Llama (4 query heads, 2 key-value heads) of `n_layer`
// blocks, built from seed 7.
std::shared_ptr<tp::nn::Module> make_model(const std::string& model, int64_t n_layer) {
  tp::manual_seed(7);
  if (model == "gpt")
    return tp::nn::GPT(tp::nn::GPTConfig{.vocab_size = kVocab,
                                         .context_length = kTime,
                                         .n_layer = n_layer,
                                         .n_head = 4,
                                         .width = kWidth})
        .ptr();
  return tp::nn::Llama(tp::nn::LlamaConfig{.vocab_size = kVocab,
                                           .context_length = kTime,
                                           .n_layer = n_layer,
                                           .n_head = 4,
                                           .n_kv_head = 2,
                                           .width = kWidth,
                                           .mlp_width = 64})
      .ptr();
}

tpar::ParallelizePlan model_plan(const tp::nn::Module& model, int tp, const Variant& v) {
  const tpar::ModelPlanOptions options{.loss_parallel = v.loss_parallel,
                                       .sequence_parallel = v.sequence_parallel};
  if (auto* gpt = dynamic_cast<const tp::nn::GPTImpl*>(&model))
    return tpar::gpt_tp_plan(gpt->config(), tp, options);
  return tpar::llama_tp_plan(dynamic_cast<const tp::nn::LlamaImpl&>(model).config(), tp, options);
}

std::shared_ptr<tp::nn::Module> cut(const std::shared_ptr<tp::nn::Module>& model, int64_t first,
                                    int64_t end) {
  if (auto gpt = std::dynamic_pointer_cast<tp::nn::GPTImpl>(model))
    return tp::nn::ModelStage(tp::nn::GPT(gpt), first, end).ptr();
  return tp::nn::ModelStage(tp::nn::Llama(std::dynamic_pointer_cast<tp::nn::LlamaImpl>(model)),
                            first, end)
      .ptr();
}

// What the unsplit model did over the whole batch: each microbatch's loss per step, and its
// parameters after the steps.
struct Reference {
  std::vector<std::vector<float>> losses;
  std::map<std::string, tp::Tensor> params;
};

tp::Tensor plain_loss(const tp::Tensor& logits, const tp::Tensor& targets) {
  return tp::cross_entropy(logits.reshape({-1, kVocab}), targets.reshape({-1}));
}

Reference train_reference(const std::string& model_name, int64_t n_layer,
                          const std::vector<std::pair<tp::Tensor, tp::Tensor>>& data) {
  auto model = make_model(model_name, n_layer);
  tp::optim::AdamW opt(model->parameters(), {.lr = 1e-2f, .eps = kAdamEps});
  Reference ref;
  for (const auto& [x, y] : data) {
    opt.zero_grad();
    tp::Tensor logits = (*model)(x);
    const int64_t count = x.size(0) / kRows;
    tp::Tensor total;
    std::vector<float> losses;
    for (int64_t mb = 0; mb < count; ++mb) {
      tp::Tensor loss =
          plain_loss(tp::narrow(logits, 0, mb * kRows, kRows), tp::narrow(y, 0, mb * kRows, kRows));
      losses.push_back(loss.item());
      total = total.defined() ? total + loss : loss;
    }
    (total * (1.0f / static_cast<float>(count))).backward();
    opt.step();
    ref.losses.push_back(losses);
  }
  for (auto& [name, p] : model->named_parameters()) ref.params[name] = tp::clone(p);
  return ref;
}

struct Job {
  Args args;
  int rank = dist::get_rank(), world = dist::get_world_size();
  int pp_size = 1;
  dist::DeviceMesh mesh;
  int bad = 0;

  explicit Job(Args a) : args(std::move(a)) {
    if (world % (args.dp * args.tp) != 0)
      throw std::invalid_argument("dp x tp does not divide the world size");
    pp_size = world / (args.dp * args.tp);
    mesh = dist::init_device_mesh("cpu", {pp_size, args.dp, args.tp}, {"pp", "dp", "tp"});
  }

  // This rank's share of a parameter of the unsplit model (its tp rank's shard).
  tp::Tensor expected_share(const std::string& name, const tp::Tensor& whole,
                            const tp::Tensor& local) const {
    tp::Tensor expected = tp::clone(whole);
    for (int64_t d = 0; d < expected.dim(); ++d)
      if (expected.size(d) != local.size(d))
        tpar::detail::shard_in_place(expected, d, mesh.get_local_rank("tp"), args.tp,
                                     name.find("c_attn") != std::string::npos ? 3 : 1);
    return expected;
  }

  static float max_difference(const tp::Tensor& a, const tp::Tensor& b) {
    if (a.shape() != b.shape()) return INFINITY;
    const auto x = a.to_vector(), y = b.to_vector();
    float worst = 0;
    for (size_t i = 0; i < x.size(); ++i) worst = std::max(worst, std::abs(x[i] - y[i]));
    return worst;
  }

  /// This rank's stages of `kind` over `num_stages` (one block each), split by the variant's plan.
  std::vector<std::shared_ptr<pp::PipelineStage>> build_stages(sc::ScheduleKind kind,
                                                               const Variant& v,
                                                               int num_stages) const;
  void run(sc::ScheduleKind kind, const Variant& v);
  void report(const std::string& at, const std::vector<std::shared_ptr<pp::PipelineStage>>& local,
              const Reference& ref, float worst_loss);
};

// The same batches on every rank: each replica trains on its share.
std::vector<std::pair<tp::Tensor, tp::Tensor>> draw_batches(int dp) {
  tp::Generator gen(5);
  std::vector<std::pair<tp::Tensor, tp::Tensor>> data;
  const int64_t batch = kRows * kMicrobatches * dp;
  for (int s = 0; s < kSteps; ++s) {
    tp::Tensor x = tp::randint(0, kVocab, {batch, kTime}, {}, &gen);
    data.emplace_back(x, tp::randint(0, kVocab, {batch, kTime}, {}, &gen));
  }
  return data;
}

std::vector<std::shared_ptr<pp::PipelineStage>> Job::build_stages(sc::ScheduleKind kind,
                                                                  const Variant& v,
                                                                  int num_stages) const {
  const int64_t n_layer = num_stages;
  const auto ranges = tp::nn::even_block_ranges(n_layer, num_stages);
  const int64_t seq = v.sequence_parallel ? kTime / args.tp : kTime;
  const int64_t logits = v.loss_parallel ? kVocab / args.tp : kVocab;
  std::vector<std::shared_ptr<pp::PipelineStage>> local;
  for (int s : pp::stages_of_rank(kind, mesh.get_local_rank("pp"), num_stages)) {
    auto model = make_model(args.model, n_layer);  // a copy of its own for each stage
    auto module = cut(model, ranges[s].first, ranges[s].second);
    tpar::parallelize_stage(*module, mesh, model_plan(*model, args.tp, v));
    const pp::TensorMeta in{s == 0 ? tp::Shape{kRows, kTime} : tp::Shape{kRows, seq, kWidth}};
    const pp::TensorMeta out{s == num_stages - 1 ? tp::Shape{kRows, kTime, logits}
                                                 : tp::Shape{kRows, seq, kWidth}};
    auto stage = std::make_shared<pp::PipelineStage>(module, s, num_stages, tp::cpu(),
                                                     std::vector{in}, std::vector{out});
    stage->set_mesh(mesh);
    stage->set_recompute(pp::RecomputePolicy::parse(args.recompute));
    if (args.recompute != "none" && stage->recomputed_modules().empty())
      throw std::logic_error("--recompute " + args.recompute + ": stage " + std::to_string(s) +
                             " recomputes nothing");
    const bool tied = args.model == "gpt";
    if (tied && (s == 0 || s == num_stages - 1))
      stage->set_tied_parameters({{"wte.weight", {0, num_stages - 1}}});
    local.push_back(stage);
  }
  return local;
}

void Job::run(sc::ScheduleKind kind, const Variant& v) {
  const int per_rank = sc::is_single_stage_per_rank(kind) ? 1 : sc::default_stages_per_rank(kind);
  const int num_stages = pp_size * per_rank;
  const auto data = draw_batches(args.dp);
  const Reference ref = train_reference(args.model, num_stages, data);
  const auto local = build_stages(kind, v, num_stages);
  const dist::ProcessGroup tp_group = mesh["tp"];
  pp::LossFn loss_fn = plain_loss;
  if (v.loss_parallel)
    loss_fn = [tp_group](const tp::Tensor& out, const tp::Tensor& target) {
      return tpar::vocab_parallel_cross_entropy(out.reshape({-1, out.size(-1)}),
                                                target.reshape({-1}), tp_group);
    };
  pp::PipelineSchedule schedule(local, kMicrobatches, loss_fn, kind);
  tp::optim::AdamW opt(pp::parameters(local), {.lr = 1e-2f, .eps = kAdamEps});
  const bool first = local.front()->is_first();
  const bool last = std::any_of(local.begin(), local.end(), [](auto& s) { return s->is_last(); });
  const int dp_rank = mesh.get_local_rank("dp");
  const std::string at = std::string(sc::schedule_name(kind)) + ", " + v.name();
  float worst_loss = 0;
  for (int step = 0; step < kSteps; ++step) {
    opt.zero_grad();
    std::vector<tp::Tensor> losses;
    const auto& [x, y] = data[step];
    schedule.step(
        first ? std::vector<tp::Tensor>{dist::shard_batch(x, mesh)} : std::vector<tp::Tensor>{},
        {.target = dist::shard_batch(y, mesh), .losses = &losses, .return_outputs = false});
    opt.step();
    if (!last) continue;
    if (losses.size() != static_cast<size_t>(kMicrobatches)) {
      std::printf("rank %d %s: %zu losses\n", rank, at.c_str(), losses.size());
      ++bad;
      continue;
    }
    for (int mb = 0; mb < kMicrobatches; ++mb) {
      const float want = ref.losses[step][dp_rank * kMicrobatches + mb], got = losses[mb].item();
      worst_loss = std::max(worst_loss, std::abs(got - want) / std::max(1.0f, std::abs(want)));
    }
  }
  report(at, local, ref, worst_loss);
}

// Prints this rank's verdict on one run: its losses' worst difference and its parameters'.
void Job::report(const std::string& at,
                 const std::vector<std::shared_ptr<pp::PipelineStage>>& local, const Reference& ref,
                 float worst_loss) {
  int params = 0;
  float worst_param = 0;
  std::string worst_name;
  for (const auto& stage : local)
    for (auto& [name, p] : stage->module().named_parameters()) {
      ++params;
      const float d = max_difference(p, expected_share(name, ref.params.at(name), p));
      if (d > worst_param) worst_name = name;
      worst_param = std::max(worst_param, d);
    }
  const bool ok = worst_loss <= kLossTolerance && worst_param <= kParamTolerance && params > 0;
  std::printf("rank %d %s: %s (loss %g, parameters %g over %d tensors, worst %s)\n", rank,
              at.c_str(), ok ? "ok" : "MISMATCH", worst_loss, worst_param, params,
              worst_name.c_str());
  if (!ok) ++bad;
}

// The last rank builds its mesh with another tp degree: every rank must refuse at construction.
int misuse_tp_mismatch(const Args& args) {
  const int rank = dist::get_rank(), world = dist::get_world_size();
  const bool odd = rank == world - 1;
  const int tp = odd ? 1 : args.tp;
  const auto mesh = dist::init_device_mesh(
      "cpu", {world / (args.dp * args.tp), args.dp * args.tp / tp, tp}, {"pp", "dp", "tp"});
  auto model = make_model(args.model, 2);
  auto module = cut(model, 0, 2);
  try {
    tpar::parallelize_stage(*module, mesh, model_plan(*model, args.tp, {}));
  } catch (const std::invalid_argument& e) {
    const std::string what = e.what();
    const bool named =
        what.find("the ranks built different meshes") != std::string::npos &&
        what.find("rank " + std::to_string(world - 1) + " built") != std::string::npos;
    std::printf("rank %d: refused: %s\n", rank, e.what());
    return named ? 0 : 1;
  }
  std::printf("rank %d: a mesh of another tp degree was not refused\n", rank);
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Args args = parse(argc, argv);
    dist::init_process_group({.timeout = std::chrono::seconds(60)});
    int rc = 0;
    if (args.misuse == "tp-mismatch") {
      rc = misuse_tp_mismatch(args);
    } else {
      Job job(args);
      for (const char* name : {"1F1B", "Interleaved1F1B", "ZBVZeroBubble"})
        for (Variant v :
             {Variant{}, Variant{.sequence_parallel = true}, Variant{.loss_parallel = true},
              Variant{.sequence_parallel = true, .loss_parallel = true}})
          job.run(sc::parse_schedule_kind(name), v);
      rc = job.bad == 0 ? 0 : 1;
    }
    dist::destroy_process_group();
    return rc;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mp_tp_pipeline_check: %s\n", e.what());
    return 1;
  }
}
