// Tests for the construction meeting's check (tensorplay/pipelining/runtime/detail/agreement.h) on
// facts made by hand: ranks that built alike pass without sending more than hashes; ranks that
// differ get a ScheduleError naming both ranks and the first difference.
#include <catch2/catch.hpp>

#include "tensorplay/pipelining/pipe_digest.h"
#include "tensorplay/pipelining/pipeline.h"
#include "tensorplay/pipelining/runtime/detail/agreement.h"
#include "tensorplay/schedules/errors.h"
#include "tensorplay/schedules/schedule_kind.h"
#include "tensorplay/tensor.h"

namespace tp = tensorplay;
namespace pp = tensorplay::pipelining;
namespace sc = tensorplay::schedules;
using pp::RankDetail;
using pp::RankFacts;

namespace {

const pp::TensorMeta kF32{{4, 16}, tp::DType::Float32};
const pp::TensorMeta kBF16{{4, 16}, tp::DType::BFloat16};

/// A two-rank 1F1B of `n` microbatches whose rank r built stage r with these boundaries.
std::vector<RankFacts> two_ranks(const pp::TensorMeta& sent, const pp::TensorMeta& expected) {
  std::vector<RankFacts> facts(2);
  for (int r = 0; r < 2; ++r) {
    facts[r].kind = "1F1B";
    facts[r].n_microbatches = 4;
    facts[r].num_stages = 2;
    facts[r].stages_per_rank = 1;
    facts[r].has_loss = true;
    facts[r].order_hash = 42;
  }
  facts[0].stages = {{0, {kF32}, {sent}}};
  facts[1].stages = {{1, {expected}, {kF32}}};
  return facts;
}

/// Names ranks "rank R (host)", and counts the calls for details (each returns `details`).
struct Meeting {
  std::vector<RankDetail> details = std::vector<RankDetail>(2);
  int gathers = 0;
  pp::detail::AgreementContext context() {
    return {"1F1B", [](int r) { return "rank " + std::to_string(r) + " (host)"; },
            [this] {
              ++gathers;
              std::vector<std::string> out;
              for (const RankDetail& d : details) out.push_back(pp::encode_message(d));
              return out;
            }};
  }
};

/// The digest of a three-layer Sequential of width 16 cut before layer `cut`.
pp::PipeDigest three_layers_cut_before(const std::string& cut) {
  tp::manual_seed(1);
  tp::nn::Sequential model(tp::nn::Linear(16, 16), tp::nn::Linear(16, 16), tp::nn::Linear(16, 16));
  auto pipe =
      pp::pipeline(model, {tp::zeros({4, 16})}, {.split_spec = {{cut, pp::SplitPoint::Beginning}}});
  return *pipe.digest();
}

std::string error_of(const std::vector<RankFacts>& facts, Meeting& meeting) {
  try {
    pp::detail::check_built_alike(facts, meeting.context());
  } catch (const sc::ScheduleError& e) {
    return e.what();
  }
  return {};
}

}  // namespace

TEST_CASE("a rank's construction facts and details survive the protocol", "[agreement]") {
  RankFacts f = two_ranks(kBF16, kF32)[1];
  f.pipe_hash = 0xfedcba9876543210ULL;
  f.wants_nccl = true;
  const RankFacts back = pp::decode_as<RankFacts>(pp::encode_message(f), "facts");
  CHECK(back == f);
  RankFacts failed;
  failed.error = {"invalid_argument", "too few microbatches"};
  CHECK(pp::decode_as<RankFacts>(pp::encode_message(failed), "facts").error == failed.error);
  CHECK_THROWS_WITH(pp::decode_as<RankFacts>("1F1B 4 2", "rank 1's facts"),
                    Catch::Contains("same tensorplay version"));
  RankDetail d{"pipe-digest 1\n", "0F0 0B0\n1F0 1B0\n"};
  CHECK(pp::decode_as<RankDetail>(pp::encode_message(d), "details") == d);
  CHECK_THROWS_AS(pp::decode_as<RankDetail>("99\nshort", "details"), std::invalid_argument);
}

TEST_CASE("ranks that built alike agree on hashes alone", "[agreement]") {
  Meeting meeting;
  // The batch dimension may differ between what is sent and what was traced.
  CHECK(error_of(two_ranks(kF32, {{8, 16}, tp::DType::Float32}), meeting).empty());
  auto facts = two_ranks(kF32, kF32);
  facts[0].pipe_hash = facts[1].pipe_hash = 7;
  CHECK(error_of(facts, meeting).empty());
  facts[1].pipe_hash = 0;  // a stage built by hand is compared by its boundaries only
  CHECK(error_of(facts, meeting).empty());
  CHECK(meeting.gathers == 0);
}

TEST_CASE("a boundary whose sender and receiver disagree names both ranks", "[agreement]") {
  Meeting meeting;
  CHECK(error_of(two_ranks(kBF16, kF32), meeting) ==
        "1F1B: on rank 1 (host), stage 1 expects float32[4,16] from stage 0; rank 0 (host) sends "
        "bfloat16[4,16]; build every rank's stages from the same model (widths, dtypes), the same "
        "example inputs and the same split (split_spec, split_policy or pipe_split() calls)");
  CHECK_THAT(error_of(two_ranks(kF32, {{4, 32}, tp::DType::Float32}), meeting),
             Catch::StartsWith("1F1B: on rank 1 (host), stage 1 expects float32[4,32] from stage "
                               "0; rank 0 (host) sends float32[4,16]"));
  auto facts = two_ranks(kF32, kF32);
  facts[1].stages[0].inputs.push_back(kF32);
  CHECK_THAT(error_of(facts, meeting),
             Catch::StartsWith("1F1B: on rank 1 (host), stage 1 expects 2 tensors from stage 0; "
                               "rank 0 (host) sends 1"));
  CHECK(meeting.gathers == 0);
}

TEST_CASE("ranks that cut differently fetch their digests and name the cuts", "[agreement]") {
  Meeting meeting;
  auto facts = two_ranks(kF32, kF32);
  const pp::PipeDigest a = three_layers_cut_before("1"), b = three_layers_cut_before("2");
  facts[0].pipe_hash = a.hash();
  facts[1].pipe_hash = b.hash();
  meeting.details[0].pipe = a.encode();
  meeting.details[1].pipe = b.encode();
  CHECK_THAT(error_of(facts, meeting),
             Catch::StartsWith("1F1B: the ranks split the model differently: rank 0 (host) cuts "
                               "before 1, rank 1 (host) before 2 (where stage 1 begins); build "
                               "every rank's stages"));
  CHECK(meeting.gathers == 1);
  // Same cuts, other parameters: the rest of the digest says what differs.
  pp::PipeDigest c = a;
  c.stages[1].holds[0] = "1.weight float32[16,15]";
  facts[1].pipe_hash = c.hash();
  meeting.details[1].pipe = c.encode();
  CHECK_THAT(error_of(facts, meeting),
             Catch::StartsWith("1F1B: the ranks built different pipes: stage 1 holds 1.weight "
                               "float32[16,16] on rank 0 (host), 1.weight float32[16,15] on rank "
                               "1 (host)"));
}

TEST_CASE("ranks that run different orders or losses are told which", "[agreement]") {
  Meeting meeting;
  auto facts = two_ranks(kF32, kF32);
  facts[1].order_hash = 43;
  meeting.details[0].order =
      pp::detail::order_text(sc::generate_order(sc::ScheduleKind::OneFOneB, 2, 1, 4));
  meeting.details[1].order =
      pp::detail::order_text(sc::generate_order(sc::ScheduleKind::GPipe, 2, 1, 4));
  CHECK_THAT(error_of(facts, meeting),
             Catch::StartsWith("1F1B: the ranks run different orders: in the order of schedule "
                               "rank 0, action ") &&
                 Catch::EndsWith("; pass the same ScheduleOptions::order (or none) on every rank"));
  facts = two_ranks(kF32, kF32);
  facts[1].has_loss = false;
  CHECK(error_of(facts, meeting) ==
        "1F1B: rank 0 (host) has a loss function and rank 1 (host) has none; pass the same "
        "loss_fn (or ScheduleOptions::outputs_loss_fn) on every rank");
  facts = two_ranks(kF32, kF32);
  facts[1].scale_grads = false;
  CHECK(error_of(facts, meeting) ==
        "1F1B: ranks disagree on ScheduleOptions::scale_grads: rank 0 (host) has true, rank 1 "
        "(host) has false");
}
