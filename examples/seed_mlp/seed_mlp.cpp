// The seed example: a model of two Blocks (Linear(128,128) + ReLU), traced and split into two
// stages at `layer1`, trained with Schedule1F1B over 4 microbatches on a fixed synthetic
// regression task. Run alone, it hosts both stages (the embedded single-process runtime); under
// `tp-launch --nproc-per-node 2` each process hosts its own stage; with `--dp N` under
// `tp-launch --nproc-per-node 2N` the two stages are replicated N times over a {pp, dp} device
// mesh, each replica training on its share of the batch. Prints the loss as it falls.
//
//   seed_mlp [steps] [--dp N]
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <stdexcept>
#include <string>

#include "examples/exit_with_message.h"
#include "tensorplay/distributed/init_device_mesh.h"
#include "tensorplay/distributed/launch_env.h"
#include "tensorplay/distributed/process_group.h"
#include "tensorplay/pipelining/build_stage.h"
#include "tensorplay/pipelining/pipeline.h"
#include "tensorplay/pipelining/runtime/schedule.h"
#include "tensorplay/tensor.h"

namespace tp = tensorplay;
namespace pp = tensorplay::pipelining;

struct BlockImpl : tp::nn::Module {
  explicit BlockImpl(int64_t dim) {
    net = register_module("net", tp::nn::Sequential(tp::nn::Linear(dim, dim), tp::nn::ReLU()));
  }
  tp::Tensor forward(const tp::Tensor& x) override { return net(x); }
  std::string type_name() const override { return "Block"; }
  tp::nn::Sequential net;
};
TENSORPLAY_MODULE(Block);

struct ModelImpl : tp::nn::Module {
  explicit ModelImpl(int64_t dim) {
    layer0 = register_module("layer0", Block(dim));
    layer1 = register_module("layer1", Block(dim));
  }
  tp::Tensor forward(const tp::Tensor& x) override { return layer1(layer0(x)); }
  std::string type_name() const override { return "Model"; }
  Block layer0{nullptr}, layer1{nullptr};
};
TENSORPLAY_MODULE(Model);

namespace {

// A whole number >= `least` from `text`, or an error naming `what` and the usage.
int count_of(const std::string& text, const char* what, int least) {
  size_t used = 0;
  int value = 0;
  try {
    value = std::stoi(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text.size() || value < least)
    throw std::invalid_argument("'" + text + "' is not " + what + " (a whole number >= " +
                                std::to_string(least) + "); usage: seed_mlp [steps] [--dp N]");
  return value;
}

int run(int argc, char** argv) {
  int steps = 300, dp = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--dp" && i + 1 < argc)
      dp = count_of(argv[++i], "a replica count", 1);
    else
      steps = count_of(arg, "a step count", 0);
  }
  const int64_t dim = 128, batch = 32;
  tp::manual_seed(0);
  // Two stages, one a process (per replica with --dp): said before any rank waits for the others.
  if (const int world = tp::distributed::read_launch_env().world_size; world > 1 && world != 2 * dp)
    throw std::invalid_argument(
        "seed_mlp cuts its model into 2 stages, one a process" +
        std::string(dp > 1 ? " in each of --dp " + std::to_string(dp) + " replicas" : "") +
        ": start it on " + std::to_string(2 * dp) + " processes (tp-launch --nproc-per-node " +
        std::to_string(2 * dp) + "), not " + std::to_string(world));

  // The launcher's environment when started by tp-launch (or torchrun, Slurm, mpirun); without
  // it, a group of one and the embedded runtime.
  tp::distributed::init_process_group();
  const int rank = tp::distributed::get_rank(), world = tp::distributed::get_world_size();

  // Trace one microbatch and cut before layer1. Alone, this process hosts every stage; under a
  // launcher, rank r builds stage r.
  Model model(dim);
  auto pipe = pp::pipeline(model, {tp::zeros({batch / 4, dim})},
                           {.split_spec = {{"layer1", pp::SplitPoint::Beginning}}});
  if (rank == 0) std::cout << pipe << "\n";
  std::vector<std::shared_ptr<pp::PipelineStage>> stages;
  tp::distributed::DeviceMesh mesh;
  if (world == 1) {
    stages = pp::build_stages(pipe, {tp::cpu()});
  } else if (dp > 1) {
    // Ranks row-major over {pp, dp}: rank r runs stage r / dp as replica r % dp.
    mesh = tp::distributed::init_device_mesh("cpu", {world / dp, dp}, {"pp", "dp"});
    stages = pp::build_stages(pipe, {mesh.get_local_rank("pp")}, tp::cpu(), mesh);
  } else {
    stages = pp::build_stages(pipe, {rank}, tp::cpu(), tp::distributed::world_group());
  }
  pp::Schedule1F1B schedule(stages, /*n_microbatches=*/4, tp::nn::mse_loss);
  tp::optim::SGD opt(pp::parameters(stages), {.lr = 0.05f, .momentum = 0.9f});
  const bool feeds_inputs = stages.front()->is_first(), gets_losses = stages.back()->is_last();

  // A fixed regression task: targets from a random teacher network, ReLU'd so they are reachable.
  tp::Generator data(42);
  tp::Tensor teacher = tp::randn({dim, dim}, {}, &data) * (1.0f / 11.3f);
  tp::Tensor x = tp::randn({batch, dim}, {}, &data);
  tp::Tensor y = tp::relu(tp::matmul(x, teacher));

  for (int step = 1; step <= steps; ++step) {
    std::vector<tp::Tensor> losses;
    // PyTorch's rule: the first stage's rank feeds the inputs, the last one's gets the losses.
    // Each replica takes its share of the batch (all of it without a "dp" dimension).
    tp::Tensor mx = tp::distributed::shard_batch(x, mesh),
               my = tp::distributed::shard_batch(y, mesh);
    schedule.step(feeds_inputs ? std::vector<tp::Tensor>{mx} : std::vector<tp::Tensor>{},
                  {.target = my, .losses = &losses});
    opt.step();
    opt.zero_grad();
    if (gets_losses && (mesh.empty() || mesh.get_local_rank("dp") == 0) &&
        (step == 1 || step % 25 == 0)) {
      float mean = 0;
      for (const auto& l : losses) mean += l.item() / losses.size();
      std::printf("step %4d  loss %.6f\n", step, mean);
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // Any error (a launcher variable, a rank that never joined, a step that failed) ends the
  // program with its message and status 1.
  return examples::exit_with_message("seed_mlp", [&] { return run(argc, argv); });
}
