// Tests for pipe_digest.h: what a Pipe's digest holds, its text form and hash, and the first
// difference between two ranks' digests in words (cuts, boundaries, parameters, graph).
#include "models.h"
#include "tensorplay/pipelining/pipe_digest.h"

using namespace stages_test;

namespace {

/// The digest of an MlpStack of `n` blocks of width `dim`, traced on `batch` rows and cut before
/// each of `cuts`.
pp::PipeDigest stack_digest(int64_t dim, int n, const std::vector<std::string>& cuts,
                            int64_t batch = 4, tp::DType dtype = tp::DType::Float32) {
  tp::manual_seed(3);
  MlpStack model(dim, n);
  model.to(dtype);
  pp::SplitSpec spec;
  for (const std::string& c : cuts) spec[c] = pp::SplitPoint::Beginning;
  auto pipe = pp::pipeline(model, {tp::zeros({batch, dim}).to(dtype)}, {.split_spec = spec});
  return *pipe.digest();
}

}  // namespace

TEST_CASE("a pipe's digest names its cuts, boundaries and parameters per stage", "[digest]") {
  pp::PipeDigest d = stack_digest(16, 3, {"layers.1"});
  REQUIRE(d.cuts.size() == 1);
  CHECK(d.cuts[0].before == "layers.1");
  REQUIRE(d.stages.size() == 2);
  REQUIRE(d.stages[0].sends.size() == 1);
  CHECK_THAT(d.stages[0].sends[0], Catch::EndsWith(" float32[4,16]"));
  CHECK(d.stages[1].receives == d.stages[0].sends);
  CHECK(d.stages[0].receives == std::vector<std::string>{"arg0 float32[4,16]"});
  CHECK(d.stages[0].holds == std::vector<std::string>{"layers.0.net.0.weight float32[16,16]",
                                                      "layers.0.net.0.bias float32[16]"});
  CHECK(d.stages[1].holds.size() == 4);  // layers.1 and layers.2
  CHECK(d.inputs == std::vector<std::string>{"arg0 float32[4,16]"});
  CHECK_THAT(d.nodes.at(0), Catch::Contains("float32[4,16] @layers.0.net.0"));
}

TEST_CASE("a pipe digest survives its text form, and equal pipes hash alike", "[digest]") {
  pp::PipeDigest d = stack_digest(16, 3, {"layers.1", "layers.2"});
  CHECK(pp::PipeDigest::decode(d.encode()) == d);
  // Two pipeline() calls of the same model and split (two ranks) give equal digests.
  CHECK(stack_digest(16, 3, {"layers.1", "layers.2"}).hash() == d.hash());
  CHECK(stack_digest(16, 3, {"layers.2"}).hash() != d.hash());
  CHECK(stack_digest(16, 3, {"layers.1", "layers.2"}, 8).hash() != d.hash());
  CHECK_THROWS_WITH(pp::PipeDigest::decode("hello"), Catch::Contains("not a pipe digest"));
  CHECK_THROWS_WITH(pp::PipeDigest::decode("pipe-digest 1\nsends x float32[1]\n"),
                    Catch::Contains("unexpected line"));
}

TEST_CASE("the first difference of two ranks' pipes is said in words", "[digest]") {
  const pp::PipeDigest base = stack_digest(16, 3, {"layers.1"});
  SECTION("equal digests: no difference") {
    CHECK(pp::first_difference(base, "rank 0", base, "rank 1").empty());
    CHECK(pp::cut_difference(base, "rank 0", base, "rank 1").empty());
  }
  SECTION("cut before another layer") {
    const pp::PipeDigest other = stack_digest(16, 3, {"layers.2"});
    const std::string want =
        "rank 0 cuts before layers.1, rank 1 before layers.2 (where stage 1 begins)";
    CHECK(pp::cut_difference(base, "rank 0", other, "rank 1") == want);
    CHECK(pp::first_difference(base, "rank 0", other, "rank 1") == want);
  }
  SECTION("cut into another number of stages") {
    const pp::PipeDigest other = stack_digest(16, 3, {"layers.1", "layers.2"});
    CHECK(pp::first_difference(base, "rank 0", other, "rank 1") ==
          "rank 0 cuts the model into 2 stages, rank 1 into 3");
  }
  SECTION("another dtype: what stage 0 receives differs first") {
    const pp::PipeDigest other = stack_digest(16, 3, {"layers.1"}, 4, tp::DType::BFloat16);
    CHECK(pp::first_difference(base, "rank 0", other, "rank 1") ==
          "stage 0 receives arg0 float32[4,16] on rank 0, arg0 bfloat16[4,16] on rank 1");
  }
  SECTION("another width: a boundary, then the parameters") {
    const pp::PipeDigest other = stack_digest(32, 3, {"layers.1"});
    CHECK_THAT(pp::first_difference(base, "rank 0", other, "rank 1"),
               Catch::StartsWith("stage 0 receives arg0 float32[4,16] on rank 0, arg0 "
                                 "float32[4,32] on rank 1"));
    pp::PipeDigest same_boundaries = base;
    same_boundaries.stages[1].holds[0] = "layers.1.net.0.weight float32[16,17]";
    CHECK(pp::first_difference(base, "rank 0", same_boundaries, "rank 1") ==
          "stage 1 holds layers.1.net.0.weight float32[16,16] on rank 0, "
          "layers.1.net.0.weight float32[16,17] on rank 1");
  }
  SECTION("a graph that differs inside a stage") {
    pp::PipeDigest other = base;
    other.nodes[1] = "%1 = tanh(%0) float32[4,16] @layers.0.net.1";
    CHECK_THAT(pp::first_difference(base, "rank 0", other, "rank 1"),
               Catch::StartsWith("the traced graphs differ at node 1: '") &&
                   Catch::EndsWith("' on rank 0, '%1 = tanh(%0) float32[4,16] @layers.0.net.1' "
                                   "on rank 1"));
  }
}

TEST_CASE("a cut is named by the outermost module beginning there, else by its node", "[digest]") {
  tp::manual_seed(3);
  MlpStack model(8, 2);
  auto pipe = pp::pipeline(model, {tp::zeros({2, 8})},
                           {.split_spec = {{"layers.0.net.1", pp::SplitPoint::Beginning}}});
  REQUIRE(pipe.digest()->cuts.size() == 1);
  CHECK(pipe.digest()->cuts[0].before == "layers.0.net.1");
  // pipe_split() between two ops of the root module: no module begins at the cut.
  ExampleCode example(4);
  auto split = pp::pipeline(example, {tp::randn({2, 4}), tp::randn({2, 4})});
  REQUIRE(split.digest()->cuts.size() == 3);
  CHECK_THAT(split.digest()->cuts[0].before, Catch::StartsWith("node ") && Catch::EndsWith(")"));
  CHECK(pp::compact_string({{2, 8}, tp::DType::BFloat16}) == "bfloat16[2,8]");
  CHECK(pp::compact_string({{}, tp::DType::Float32}) == "float32[]");
}

TEST_CASE("build_stage carries the pipe's digest, and a stage built by hand has none", "[digest]") {
  tp::manual_seed(3);
  MlpStack model(8, 2);
  auto pipe = pp::pipeline(model, {tp::zeros({2, 8})},
                           {.split_spec = {{"layers.1", pp::SplitPoint::Beginning}}});
  pp::PipelineStage built = pp::build_stage(pipe, 1, tp::cpu());
  CHECK(built.pipe_digest() == pipe.digest());
  pp::PipelineStage by_hand(tp::nn::Linear(8, 8).ptr(), 0, 1, tp::cpu(),
                            std::vector<tp::Tensor>{tp::zeros({2, 8})});
  CHECK(by_hand.pipe_digest() == nullptr);
}
