// Misuse and faults of pipeline checkpoints (tensorplay/pipelining/checkpoints/checkpoint.h):
// resuming with another stage count or another model says what the checkpoint holds and what to do,
// and a save that is killed or fails leaves no temporary files behind for long (the next save or
// load removes a dead writer's, never a live one's).
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "misuse_support.h"
#include "tensorplay/pipelining/build_stage.h"
#include "tensorplay/pipelining/checkpoints/checkpoint.h"
#include "tensorplay/pipelining/pipeline.h"
#include "tensorplay/tensor.h"
#include "tensors/temp_path.h"

namespace tp = tensorplay;
namespace pp = tensorplay::pipelining;
namespace fs = std::filesystem;
using misuse::expect_error;

namespace {

using test_files::TempDir;

struct Stack : tp::nn::Module {
  Stack(int64_t width, int depth, const std::string& name = "layers") {
    layers = register_module(name, tp::nn::Sequential());
    for (int i = 0; i < depth; ++i) layers->push_back(tp::nn::Linear(width, width).ptr());
  }
  tp::Tensor forward(const tp::Tensor& x) override { return layers(x); }
  tp::nn::Sequential layers;
};

// `stages` stages of a stack of 4 layers (cut evenly), and an AdamW over them.
struct Job {
  Job(int stages_count, int64_t width = 8, const std::string& name = "layers")
      : model(width, 4, name) {
    tp::manual_seed(1);
    pp::PipelineOptions options;
    for (int s = 1; s < stages_count; ++s)
      options.split_spec[name + "." + std::to_string(s * 4 / stages_count)] =
          pp::SplitPoint::Beginning;
    auto pipe = pp::pipeline(model, {tp::zeros({2, width})}, options);
    stages = pp::build_stages(pipe, {tp::cpu()});
    opt = std::make_unique<tp::optim::AdamW>(pp::parameters(stages), tp::optim::AdamWOptions{});
  }
  Stack model;
  std::vector<std::shared_ptr<pp::PipelineStage>> stages;
  std::unique_ptr<tp::optim::AdamW> opt;
};

// Every file under `dir` whose name holds ".tmp." (a save's temporary files).
std::vector<std::string> temp_files(const std::string& dir) {
  std::vector<std::string> found;
  for (const auto& entry : fs::recursive_directory_iterator(dir))
    if (entry.path().filename().string().find(".tmp.") != std::string::npos)
      found.push_back(entry.path().filename().string());
  return found;
}

std::string host_name() {
  char name[256] = {};
  ::gethostname(name, sizeof(name) - 1);
  return name;
}

// Runs `body` in a forked child and returns its wait status (bounded: 20 s, then killed).
int in_child(const std::function<void()>& body) {
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    body();
    ::_exit(0);
  }
  int status = 0;
  for (int i = 0; i < 2000; ++i) {
    if (::waitpid(child, &status, WNOHANG) == child) return status;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ::kill(child, SIGKILL);
  ::waitpid(child, &status, 0);
  FAIL("the child did not end within 20 s");
  return status;
}

}  // namespace

TEST_CASE("misuse: resuming with another stage count names the count it was saved with",
          "[misuse][checkpoint]") {
  TempDir dir;
  Job two(2);
  pp::save_checkpoint(dir.path, two.stages, *two.opt, 1);
  pp::save_checkpoint(dir.path, two.stages, *two.opt, 2);
  Job four(4);
  const std::vector<std::string> words = {"saved by 2 stages", "this pipeline has 4",
                                          "build the pipeline with the 2 stages",
                                          "another checkpoint folder"};
  expect_error<pp::CheckpointError>([&] { pp::load_checkpoint(dir.path, four.stages, *four.opt); },
                                    words);
  expect_error<pp::CheckpointError>(
      [&] { pp::load_checkpoint(dir.path, four.stages, *four.opt, 2); }, words);
  // The steps are complete, for 2 stages: not called incomplete.
  try {
    pp::load_checkpoint(dir.path, four.stages, *four.opt);
  } catch (const pp::CheckpointError& e) {
    CHECK(std::string(e.what()).find("incomplete") == std::string::npos);
  }
  CHECK(pp::complete_checkpoint_steps(dir.path, 4).empty());
  CHECK(pp::complete_checkpoint_steps(dir.path, 2) == std::vector<int64_t>{1, 2});
  CHECK(pp::load_checkpoint(dir.path, two.stages, *two.opt) == 2);
}

TEST_CASE("misuse: a checkpoint of another model gives no hint of an option load_checkpoint lacks",
          "[misuse][checkpoint]") {
  TempDir dir;
  Job saved(2);
  pp::save_checkpoint(dir.path, saved.stages, *saved.opt, 3);
  Job renamed(2, 8, "blocks");  // the same shapes under other parameter names
  const std::string message = expect_error<pp::CheckpointError>(
      [&] { pp::load_checkpoint(dir.path, renamed.stages, *renamed.opt); },
      {"does not fit these stages", "build the stages as when saving"});
  CHECK(message.find("strict") == std::string::npos);
}

TEST_CASE("misuse: a save killed mid-write leaves temporary files the next save removes",
          "[misuse][checkpoint]") {
  TempDir dir;
  Job job(2, 64);  // stage files of about 100 KB
  // A writer killed by SIGXFSZ (the file-size limit) in the middle of its first stage file.
  pid_t killed = 0;
  const int status = in_child([&] {
    ::signal(SIGXFSZ, SIG_DFL);
    rlimit limit{4096, 4096};
    ::setrlimit(RLIMIT_FSIZE, &limit);
    pp::save_checkpoint(dir.path, job.stages, *job.opt, 5);
  });
  REQUIRE(WIFSIGNALED(status));
  REQUIRE(WTERMSIG(status) == SIGXFSZ);
  const std::vector<std::string> left = temp_files(dir.path);
  REQUIRE(left.size() == 1);
  killed = static_cast<pid_t>(std::stol(left[0].substr(left[0].rfind('.') + 1)));

  // Files no save may take: this process's, another live process's, another host's, and an older
  // version's name ("<file>.tmp.<pid>") written just now.
  const std::string step = dir.path + "/step_00000005/";
  const std::string dead = std::to_string(killed);
  const pid_t parent = ::getppid();
  const std::vector<std::string> kept = {
      "stage_1.tpsd.tmp." + host_name() + "." + std::to_string(::getpid()),
      "stage_1.done.tmp." + host_name() + "." + std::to_string(parent),
      "stage_0.done.tmp.another-host.example." + dead, "stage_0.done.tmp." + dead};
  for (const std::string& name : kept) std::ofstream(step + name) << "live";
  // An older version's file of a dead writer, untouched for two hours: taken.
  const std::string old = step + "stage_1.tpsd.tmp." + dead;
  std::ofstream(old) << "old";
  fs::last_write_time(old, fs::file_time_type::clock::now() - std::chrono::hours(2));

  pp::save_checkpoint(dir.path, job.stages, *job.opt, 6);
  std::vector<std::string> now = temp_files(dir.path);
  std::sort(now.begin(), now.end());
  std::vector<std::string> expected = kept;
  std::sort(expected.begin(), expected.end());
  // The killed writer's file and the old one are gone (a load removes them too); the rest stay.
  CHECK(now == expected);
  CHECK(pp::latest_checkpoint_step(dir.path, 2) == 6);
}

TEST_CASE("misuse: a save that fails on a full disk removes its temporary file and says why",
          "[misuse][checkpoint]") {
  TempDir dir;
  Job job(2, 64);
  const std::string message_file = dir.path + "/message";
  // With SIGXFSZ ignored, writing past the file-size limit fails with EFBIG, as a full disk
  // fails with ENOSPC: the save throws.
  const int status = in_child([&] {
    ::signal(SIGXFSZ, SIG_IGN);
    std::string message = "(no error)";
    rlimit limit{4096, 4096};
    ::setrlimit(RLIMIT_FSIZE, &limit);
    try {
      pp::save_checkpoint(dir.path, job.stages, *job.opt, 5);
    } catch (const pp::CheckpointError& e) {
      message = e.what();
    }
    std::ofstream(message_file) << message.substr(0, 1000);
  });
  REQUIRE(WIFEXITED(status));
  std::ifstream in(message_file);
  const std::string message((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  INFO("error: " << message);
  CHECK(message.find("cannot write") != std::string::npos);
  CHECK(message.find("stage_0.tpsd") != std::string::npos);
  CHECK(message.find("free space") != std::string::npos);
  CHECK(temp_files(dir.path).empty());
}
