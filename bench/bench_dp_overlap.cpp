// Data-parallel gradient averaging overlapped with the backward: the MLP job of
// mlp_pipeline_job.h on a {pp 2, dp 2} device mesh in 4 processes, each replica on half of the
// batch, with the all-reduce of each gradient bucket started as soon as its gradients are final
// (overlap) against all of it after the step's backward (no overlap).
//
//   ./build/bench/bench_dp_overlap [--rounds 3] [--schedule 1F1B] [--bucket-mb 4]
//                                  [--steps 20 --warmup 3 --width 1024 --blocks 8 --batch 128
//                                   --microbatches 8] [--tp-launch PATH]
//
// Each round runs the job twice under tp-launch (4 ranks, one BLAS thread each), without and
// with overlap, and takes from every rank its wall time per step and the all-reduce time the
// reducer measured. Without overlap the whole all-reduce is exposed: the step waits for it after
// its backward. The figure: hidden = (step time without overlap - step time with it) / the
// all-reduce time without overlap, per round, the median over rounds in the last line as
// "ratio" (goal: at least 0.5, half of the all-reduce hidden). Prints JSON lines.
//
// `--compute timed` runs the same shapes with stages whose forward and backward are waits
// (timed_stage.h: --wait-us per block and pass, the weights' gradients of the MLP's sizes), so
// the cores stay free while the stages "compute", as the host's cores do while a GPU computes:
// what the overlap hides when the all-reduce does not compete with compute for the cores.
//
// Why the rest is not hidden: each rank reports its CPU time per step, all threads and the
// all-reduce's (tp-allreduce and tp-ucx); the last line gives, for the overlapped run, the cores
// busy on average ("busy_cores_overlap", out of "cores"), the core time per step no thread used
// ("spare_core_ms_overlap": all the overlap can hide the all-reduce's work in) and that work
// ("all_reduce_cpu_ms_overlap", all ranks together). With every core busy the remainder is the
// machine's: the all-reduce's work adds to the step whatever its order.
#include <algorithm>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "mlp_pipeline_job.h"
#include "tensorplay/distributed/init_device_mesh.h"
#include "timed_stage.h"

namespace {

namespace dist = tensorplay::distributed;

struct Config {
  std::string schedule = "1F1B";
  double bucket_mb = 4;
  bool overlap = true;
  std::string compute = "mlp";  ///< "mlp" (the products) or "timed" (waits)
  int wait_us = 1000;           ///< timed: each block's forward, I and W
};

/// Timed stand-ins for a stage's `blocks` Linear(width, width) layers: one wait per block and
/// pass, a weight of width * width values each.
struct TimedStackImpl : bench::tp::nn::Module {
  TimedStackImpl(int64_t blocks, int64_t width, timed_stage::Waits waits) {
    for (int64_t b = 0; b < blocks; ++b)
      layers.push_back(
          register_module("block" + std::to_string(b),
                          std::make_shared<timed_stage::TimedModule>(waits, width * width)));
  }
  bench::tp::Tensor forward(const bench::tp::Tensor& x) override {
    bench::tp::Tensor h = x;
    for (const auto& l : layers) h = l->forward(h);
    return h;
  }
  std::vector<std::shared_ptr<timed_stage::TimedModule>> layers;
};

/// This rank's stages of the job's shapes, each built on `mesh`: the MLP's blocks, or timed ones.
std::vector<std::shared_ptr<bench::pp::PipelineStage>> job_stages(
    const bench::MlpJob& replica, const Config& config, bench::Mlp& model,
    const dist::DeviceMesh& mesh, bench::tp::schedules::ScheduleKind kind, int num_stages) {
  const std::vector<int> mine =
      bench::pp::stages_of_rank(kind, mesh.get_local_rank("pp"), num_stages);
  if (config.compute == "mlp")
    return bench::pp::build_stages(bench::split_mlp(model, replica, num_stages), mine,
                                   bench::tp::cpu(), mesh);
  if (config.compute != "timed")
    throw std::invalid_argument("--compute " + config.compute + " is not mlp or timed");
  const std::chrono::microseconds wait(config.wait_us);
  const bench::pp::TensorMeta meta{
      bench::tp::Shape{replica.batch / replica.n_microbatches, replica.width}};
  std::vector<std::shared_ptr<bench::pp::PipelineStage>> stages;
  for (int s : mine) {
    auto stage = std::make_shared<bench::pp::PipelineStage>(
        std::make_shared<TimedStackImpl>(replica.blocks / num_stages, replica.width,
                                         timed_stage::Waits{wait, wait, wait}),
        s, num_stages, bench::tp::cpu(), std::vector<bench::pp::TensorMeta>{meta},
        std::vector<bench::pp::TensorMeta>{meta});
    stage->set_mesh(mesh);
    stages.push_back(stage);
  }
  return stages;
}

// One rank: trains the job on its replica's half of the batch; prints its figures.
int run_rank(const bench::MlpJob& job, const Config& config) {
  openblas_set_num_threads(1);
  bench::tp::set_default_num_threads(1);
  dist::init_process_group({.timeout = std::chrono::seconds(60)});
  const int world = dist::get_world_size();
  if (world % 2 != 0) throw std::invalid_argument("the job needs an even number of processes");
  const auto kind = bench::tp::schedules::parse_schedule_kind(config.schedule);
  auto mesh = dist::init_device_mesh("cpu", {world / 2, 2}, {"pp", "dp"});
  const int num_stages = world / 2 * bench::tp::schedules::default_stages_per_rank(kind);
  bench::tp::manual_seed(0);
  bench::Mlp model(job.width, job.blocks);
  bench::MlpJob replica = job;
  replica.batch = job.batch / 2;  // each replica's share; the split follows its microbatches
  auto stages = job_stages(replica, config, model, mesh, kind, num_stages);
  bench::pp::ScheduleOptions options{.step_timeout = std::chrono::seconds(60)};
  options.data_parallel.bucket_cap_bytes = static_cast<int64_t>(config.bucket_mb * (1 << 20));
  options.data_parallel.overlap = config.overlap;
  bench::pp::PipelineSchedule schedule(stages, job.n_microbatches, bench::tp::nn::mse_loss, kind,
                                       options);
  bench::tp::optim::SGD opt(bench::pp::parameters(stages), {.lr = job.lr});
  bench::MlpData data(job);
  bench::tp::Tensor x = dist::shard_batch(data.x, mesh), y = dist::shard_batch(data.y, mesh);
  const bool hosts_first = stages.front()->is_first();
  double all_reduce_ms = 0, exposed_ms = 0;
  int64_t bytes = 0;
  int buckets = 0;
  auto step = [&](bool timed) {
    schedule.step(
        hosts_first ? std::vector<bench::tp::Tensor>{x} : std::vector<bench::tp::Tensor>{},
        {.target = y});
    opt.step();
    opt.zero_grad();
    if (!timed) return;
    auto st = schedule.data_parallel_stats();
    all_reduce_ms += st.all_reduce_ms;
    exposed_ms += st.exposed_ms;
    bytes = st.bytes;
    buckets = st.buckets;
  };
  for (int i = 0; i < job.warmup; ++i) step(false);
  dist::barrier();
  const auto threads_before = bench::pp::process_thread_times();
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < job.steps; ++i) step(true);
  const double seconds = bench::seconds_since(start);
  // CPU time per step: the whole process's, and the all-reduce's (its thread and UCX's).
  const auto threads =
      bench::pp::thread_times_since(threads_before, bench::pp::process_thread_times());
  double cpu_ms = 0, comm_cpu_ms = 0;
  for (const auto& t : threads) {
    cpu_ms += static_cast<double>(t.cpu_ns) / 1e6 / job.steps;
    if (t.name == "tp-allreduce" || t.name == "tp-ucx")
      comm_cpu_ms += static_cast<double>(t.cpu_ns) / 1e6 / job.steps;
  }
  std::cout << "{\"result\":\"dp_rank\",\"rank\":" << dist::get_rank()
            << ",\"overlap\":" << (config.overlap ? "true" : "false")
            << ",\"step_ms\":" << 1e3 * seconds / job.steps
            << ",\"all_reduce_ms\":" << all_reduce_ms / job.steps
            << ",\"exposed_ms\":" << exposed_ms / job.steps << ",\"buckets\":" << buckets
            << ",\"bytes\":" << bytes << ",\"cpu_ms\":" << cpu_ms
            << ",\"comm_cpu_ms\":" << comm_cpu_ms
            << ",\"threads\":" << bench::pp::thread_times_json(threads) << "}" << std::endl;
  return 0;
}

struct RunFigures {
  double step_ms = 0;        // the slowest rank's
  double all_reduce_ms = 0;  // the largest over ranks
  double exposed_ms = 0;     // the largest over ranks
  double cpu_ms = 0;         // CPU time per step, all ranks together
  double comm_cpu_ms = 0;    // of which the all-reduce's threads (tp-allreduce, tp-ucx)
  std::string error;
};

RunFigures launch(const std::string& tp_launch, const bench::MlpJob& job, const Config& config) {
  std::string command = "OPENBLAS_NUM_THREADS=1 " + bench::shell_quote(tp_launch) +
                        " --nproc-per-node 4 --grace-seconds 2 -- " +
                        bench::shell_quote(bench::self_executable()) + " --worker --schedule " +
                        config.schedule + " --bucket-mb " + std::to_string(config.bucket_mb) +
                        " --overlap " + (config.overlap ? "1" : "0") + " --compute " +
                        config.compute + " --wait-us " + std::to_string(config.wait_us) + " " +
                        job.flags() + " 2>&1";
  bench::CommandOutput out = bench::run_command(command);
  RunFigures f;
  int ranks = 0;
  for (const std::string& line : out.lines) {
    size_t json = line.find("{\"result\":\"dp_rank\"");
    if (json == std::string::npos) continue;
    std::string r = line.substr(json);
    f.step_ms = std::max(f.step_ms, bench::json_number(r, "step_ms").value_or(0));
    f.all_reduce_ms = std::max(f.all_reduce_ms, bench::json_number(r, "all_reduce_ms").value_or(0));
    f.exposed_ms = std::max(f.exposed_ms, bench::json_number(r, "exposed_ms").value_or(0));
    f.cpu_ms += bench::json_number(r, "cpu_ms").value_or(0);
    f.comm_cpu_ms += bench::json_number(r, "comm_cpu_ms").value_or(0);
    ++ranks;
  }
  if (out.exit_code != 0 || ranks != 4)
    f.error = "the 4-process run failed (exit code " + std::to_string(out.exit_code) + ", " +
              std::to_string(ranks) + " ranks reported); its last lines:\n" + bench::tail_of(out);
  return f;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty()      ? 0
         : v.size() % 2 ? v[v.size() / 2]
                        : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

}  // namespace

int main(int argc, char** argv) {
  bench::MlpJob job;
  Config config;
  int rounds = 3;
  std::string tp_launch_flag;
  bool worker = false;
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i];
    if (flag == "--worker") {
      worker = true;
      continue;
    }
    if (i + 1 >= argc) {
      std::cerr << "flag " << flag << " needs a value\n";
      return 2;
    }
    std::string value = argv[++i];
    if (flag == "--rounds")
      rounds = std::stoi(value);
    else if (flag == "--tp-launch")
      tp_launch_flag = value;
    else if (flag == "--schedule")
      config.schedule = value;
    else if (flag == "--bucket-mb")
      config.bucket_mb = std::stod(value);
    else if (flag == "--overlap")
      config.overlap = value != "0";
    else if (flag == "--compute")
      config.compute = value;
    else if (flag == "--wait-us")
      config.wait_us = std::stoi(value);
    else if (!job.parse_flag(flag, value)) {
      std::cerr << "unknown flag " << flag
                << " (known: --rounds, --schedule, --bucket-mb, --compute, --wait-us, "
                << "--tp-launch, and the job's " << job.flags() << ")\n";
      return 2;
    }
  }
  if (worker) {
    try {
      return run_rank(job, config);
    } catch (const std::exception& e) {
      std::cout << "worker rank " << dist::get_rank() << " failed: " << e.what() << std::endl;
      return 1;
    }
  }
  std::string tp_launch;
  if (!bench::locate_tp_launch(tp_launch_flag, tp_launch)) return 1;
  std::vector<double> hidden, step_plain, step_overlap, all_reduce, exposed_overlap;
  std::vector<double> spare_core_ms, comm_cpu, busy_cores;
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  for (int round = 0; round < rounds; ++round) {
    RunFigures runs[2];
    for (bool overlap : {false, true}) {
      Config c = config;
      c.overlap = overlap;
      RunFigures f = launch(tp_launch, job, c);
      if (!f.error.empty()) {
        std::cout << "{\"round\":" << round << ",\"error\":\"run failed: see standard error\"}"
                  << std::endl;
        std::cerr << f.error;
        return 1;
      }
      std::cout << "{\"round\":" << round << ",\"overlap\":" << (overlap ? "true" : "false")
                << ",\"step_ms\":" << f.step_ms << ",\"all_reduce_ms\":" << f.all_reduce_ms
                << ",\"exposed_ms\":" << f.exposed_ms << ",\"cpu_ms\":" << f.cpu_ms
                << ",\"comm_cpu_ms\":" << f.comm_cpu_ms << "}" << std::endl;
      runs[overlap ? 1 : 0] = f;
    }
    const double h = (runs[0].step_ms - runs[1].step_ms) / runs[0].all_reduce_ms;
    hidden.push_back(h);
    step_plain.push_back(runs[0].step_ms);
    step_overlap.push_back(runs[1].step_ms);
    all_reduce.push_back(runs[0].all_reduce_ms);
    exposed_overlap.push_back(runs[1].exposed_ms);
    // The machine's share: the cores' time per step left over by the overlapped run's CPU work
    // (every rank's compute and communication) is all an overlap can hide the all-reduce in.
    const double core_ms = cores * runs[1].step_ms;
    spare_core_ms.push_back(std::max(0.0, core_ms - runs[1].cpu_ms));
    comm_cpu.push_back(runs[1].comm_cpu_ms);
    busy_cores.push_back(runs[1].cpu_ms / runs[1].step_ms);
    std::cout << "{\"round\":" << round << ",\"hidden_fraction\":" << h << "}" << std::endl;
  }
  std::cout << "{\"bench\":\"bench_dp_overlap\",\"ratio\":" << median(hidden)
            << ",\"hidden_fraction_min\":" << *std::min_element(hidden.begin(), hidden.end())
            << ",\"hidden_fraction_max\":" << *std::max_element(hidden.begin(), hidden.end())
            << ",\"step_ms_no_overlap\":" << median(step_plain)
            << ",\"step_ms_overlap\":" << median(step_overlap)
            << ",\"all_reduce_ms_no_overlap\":" << median(all_reduce)
            << ",\"exposed_ms_overlap\":" << median(exposed_overlap) << ",\"cores\":" << cores
            << ",\"busy_cores_overlap\":" << median(busy_cores)
            << ",\"spare_core_ms_overlap\":" << median(spare_core_ms)
            << ",\"all_reduce_cpu_ms_overlap\":" << median(comm_cpu) << ",\"schedule\":\""
            << config.schedule << "\",\"compute\":\"" << config.compute
            << "\",\"bucket_mb\":" << config.bucket_mb << ",\"width\":" << job.width
            << ",\"blocks\":" << job.blocks << ",\"batch\":" << job.batch
            << ",\"microbatches\":" << job.n_microbatches
            << ",\"processes\":4,\"pp\":2,\"dp\":2,\"steps\":" << job.steps
            << ",\"rounds\":" << rounds << "}" << std::endl;
  return 0;
}
