// Tests for tensorplay/distributed/init_device_mesh.h in one process: the job's mesh checked
// against the world size, groups along a dimension, stages built on a mesh (traffic over "pp", the
// mesh kept for the schedule), and clear errors. Meshes across processes run in tests/multiprocess.
#include <catch2/catch.hpp>

#include "tensorplay/distributed/init_device_mesh.h"
#include "tensorplay/pipelining/pipeline.h"
#include "tensorplay/pipelining/runtime/schedule.h"
#include "tensorplay/tensor.h"

namespace tp = tensorplay;
namespace pp = tensorplay::pipelining;
namespace dist = tensorplay::distributed;

namespace {

struct TwoLayerImpl : tp::nn::Module {
  TwoLayerImpl() {
    a = register_module("a", tp::nn::Linear(4, 4));
    b = register_module("b", tp::nn::Linear(4, 4));
  }
  tp::Tensor forward(const tp::Tensor& x) override { return b(tp::relu(a(x))); }
  tp::nn::Linear a{nullptr}, b{nullptr};
};
TENSORPLAY_MODULE(TwoLayer);

}  // namespace

TEST_CASE("the job's mesh must hold as many ranks as the job", "[device_mesh]") {
  dist::destroy_process_group();
  dist::init_process_group({.env = dist::LaunchEnv{}});  // a group of one
  auto mesh = dist::init_device_mesh("cpu", {1, 1}, {"pp", "dp"});
  CHECK(mesh.size() == 1);
  CHECK(mesh.get_coordinate() == std::vector<int>{0, 0});
  CHECK(dist::get_group(mesh, "dp").ranks() == std::vector<int>{0});
  dist::ProcessGroup pp_group = mesh["pp"];
  CHECK(pp_group.ranks() == std::vector<int>{0});
  CHECK(dist::init_device_mesh({1}, {"dp"}).device_type() == "cpu");
  CHECK_THROWS_WITH(dist::init_device_mesh("cpu", {2, 2}, {"pp", "dp"}),
                    Catch::Contains("holds 4 ranks, but the job has 1"));
  CHECK_THROWS_WITH(dist::ProcessGroup(mesh), Catch::Contains("has 2 dimensions"));
  dist::destroy_process_group();
}

TEST_CASE("stages built on a mesh keep it, and a schedule without replicas trains as before",
          "[device_mesh]") {
  dist::destroy_process_group();
  dist::init_process_group({.env = dist::LaunchEnv{}});
  auto mesh = dist::init_device_mesh("cpu", {1, 1}, {"pp", "dp"});
  tp::manual_seed(3);
  TwoLayer model, twin;
  twin->load_state_dict(model->state_dict());
  auto pipe =
      pp::pipeline(model, {tp::zeros({2, 4})}, {.split_spec = {{"b", pp::SplitPoint::Beginning}}});
  auto stages = pp::build_stages(pipe, {0, 1}, tp::cpu(), mesh);
  for (const auto& s : stages) {
    CHECK(s->get_mesh() == mesh);
    CHECK(s->group_ranks() == std::vector<int>{0});
  }
  auto ref_pipe =
      pp::pipeline(twin, {tp::zeros({2, 4})}, {.split_spec = {{"b", pp::SplitPoint::Beginning}}});
  auto ref = pp::build_stages(ref_pipe, {tp::cpu()});
  pp::Schedule1F1B schedule(stages, 2, tp::nn::mse_loss);
  pp::Schedule1F1B reference(ref, 2, tp::nn::mse_loss);
  tp::Tensor x = tp::randn({4, 4}), y = tp::randn({4, 4});
  schedule.step({x}, {.target = y});
  reference.step({x}, {.target = y});
  for (int s = 0; s < 2; ++s)
    for (const auto& [name, p] : stages[s]->module().named_parameters())
      CHECK(p.grad().to_vector() == ref[s]->module().find_tensor(name).grad().to_vector());
  CHECK_FALSE(schedule.data_parallel_stats().synced);  // one replica: nothing to average
  {
    auto guard = schedule.no_sync();
    CHECK_FALSE(schedule.requires_gradient_sync());
  }
  CHECK(schedule.requires_gradient_sync());

  auto flat = dist::init_device_mesh("cpu", {1, 1}, {"dp", "tp"});
  CHECK_THROWS_WITH(pp::build_stage(pipe, 0, tp::cpu(), flat),
                    Catch::Contains("no \"pp\" dimension"));
  dist::destroy_process_group();
}

TEST_CASE("a stage keeps one placement: a process group places it as its one-dimensional mesh",
          "[device_mesh]") {
  dist::destroy_process_group();
  dist::init_process_group({.env = dist::LaunchEnv{}});
  TwoLayer model;
  auto pipe =
      pp::pipeline(model, {tp::zeros({2, 4})}, {.split_spec = {{"b", pp::SplitPoint::Beginning}}});
  // The seed's build_stage(pipe, rank, device, group): the group converts to a "pp" mesh.
  pp::PipelineStage stage = pp::build_stage(pipe, 0, tp::cpu(), dist::world_group());
  CHECK(stage.get_mesh().mesh_dim_names() == std::vector<std::string>{"pp"});
  CHECK(stage.group_ranks() == std::vector<int>{0});
  // A mesh without a "pp" dimension places no stage, whichever way it is given.
  auto dp_only = dist::init_device_mesh("cpu", {1}, {"dp"});
  CHECK_THROWS_WITH(pp::build_stage(pipe, 0, tp::cpu(), dp_only),
                    Catch::Contains("has no \"pp\" dimension"));
  CHECK_THROWS_WITH(stage.set_mesh(dp_only), Catch::Contains("has no \"pp\" dimension"));
  // A stage built without a placement runs on the world group.
  CHECK(pp::build_stage(pipe, 1, tp::cpu()).group_ranks().empty());
  dist::destroy_process_group();
}
