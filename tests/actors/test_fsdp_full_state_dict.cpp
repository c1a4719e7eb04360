// Tests for fsdp/full_state_dict.h: a model trained sharded on dp 4 saved as a full state dict,
// loaded sharded on dp 2 and unsharded (the same outputs, bit for bit, and the same dict back),
// with bfloat16 compute keeping float32 in the dict; a missing key is a clear error.
#include <catch2/catch.hpp>
#include <cmath>

#include "in_process_job.h"
#include "tensorplay/distributed/fsdp/full_state_dict.h"
#include "tensorplay/distributed/fsdp/fully_shard.h"
#include "tensorplay/nn.h"
#include "tensorplay/optim.h"
#include "tensorplay/tensor.h"

namespace tp = tensorplay;
namespace dist = tensorplay::distributed;
namespace fsdp = tensorplay::distributed::fsdp;

namespace {

using Values = std::map<std::string, std::vector<float>>;

/// Linear(5, 7) -> Linear(7, 3): dims 0 of 7 and 3, indivisible by 2 and 4.
tp::nn::Sequential make_model() {
  return tp::nn::Sequential(tp::nn::Linear(5, 7), tp::nn::ReLU(), tp::nn::Linear(7, 3));
}

tp::Tensor input() {
  std::vector<float> v(4 * 5);
  for (size_t i = 0; i < v.size(); ++i) v[i] = std::cos(0.3f * static_cast<float>(i));
  return tp::from_vector(v, {4, 5});
}

Values values(const tp::StateDict& dict) {
  Values out;
  for (const auto& [name, t] : dict) out[name] = t.to_vector();
  return out;
}

tp::StateDict dict_of(const Values& v, const tp::StateDict& shapes) {
  tp::StateDict out;
  for (const auto& [name, t] : shapes) out.insert(name, tp::from_vector(v.at(name), t.shape()));
  return out;
}

}  // namespace

TEST_CASE("a full state dict saved sharded on dp 4 loads sharded on dp 2 and unsharded",
          "[fsdp][full_state_dict]") {
  dist::destroy_process_group();
  const tp::StateDict shapes = make_model()->state_dict();
  // dp 4: one AdamW step with bfloat16 compute, then the full dict on every member.
  std::vector<Values> saved(4);
  std::vector<tp::DType> saved_dtype(4, tp::DType::BFloat16);
  auto trained = tp::testing::run_ranks(4, {0, 1, 2, 3}, std::chrono::seconds(20), [&](auto& g) {
    tp::nn::Sequential model = make_model();
    model->load_state_dict(shapes);  // the same start on every member
    fsdp::fully_shard(model, {.mesh = g, .mp_policy = {.param_dtype = tp::DType::BFloat16}});
    tp::optim::AdamW opt(model->parameters(), {.lr = 1e-2f});
    tp::Tensor x = input().slice0(g.rank(), g.rank() + 1);
    tp::sum(model(x).to(tp::DType::Float32)).backward();
    opt.step();
    const tp::StateDict full = fsdp::full_state_dict(*model);
    saved_dtype[g.rank()] = full.find("0.weight")->dtype();
    saved[g.rank()] = values(full);
  });
  for (int r = 0; r < 4; ++r) {
    INFO("rank " << r);
    CHECK(trained[r].error == "");
    CHECK(saved_dtype[r] == tp::DType::Float32);  // the master weights, not the bfloat16 copy
    CHECK(saved[r] == saved[0]);
  }
  REQUIRE(saved[0].at("0.weight").size() == 35);
  CHECK(saved[0].at("0.weight") != values(shapes).at("0.weight"));  // the step changed it

  // Unsharded.
  tp::nn::Sequential plain = make_model();
  plain->load_state_dict(dict_of(saved[0], shapes));
  const std::vector<float> expect = plain(input()).to_vector();

  // dp 2, sharded.
  std::vector<std::vector<float>> outputs(2);
  std::vector<Values> round_trip(2);
  std::vector<std::string> missing(2);
  auto loaded = tp::testing::run_ranks(2, {0, 1}, std::chrono::seconds(20), [&](auto& g) {
    tp::nn::Sequential model = make_model();
    fsdp::fully_shard(model, {.mesh = g});
    fsdp::load_full_state_dict(*model, dict_of(saved[0], shapes));
    outputs[g.rank()] = model(input()).to_vector();
    round_trip[g.rank()] = values(fsdp::full_state_dict(*model));
    tp::StateDict partial;
    partial.insert("0.weight", tp::zeros({7, 5}));
    missing[g.rank()] = tp::testing::error_of([&] { fsdp::load_full_state_dict(*model, partial); });
  });
  for (int r = 0; r < 2; ++r) {
    INFO("rank " << r);
    CHECK(loaded[r].error == "");
    CHECK(outputs[r] == expect);
    CHECK(round_trip[r] == saved[0]);
    CHECK_THAT(missing[r], Catch::Contains("the dict has no '0.bias'"));
  }
}
