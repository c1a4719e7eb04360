// The construction meeting's facts and checks: what each rank built, in the bytes it sends the
// others, and the checks every rank runs on everyone's facts (alike, so all ranks fail alike).
#include <map>
#include <stdexcept>
#include <string>

#include "tensorplay/distributed/detail/group_runtime.h"
#include "tensorplay/pipelining/pipe_digest.h"
#include "tensorplay/pipelining/runtime/detail/agreement.h"
#include "tensorplay/pipelining/runtime/detail/process_ranks.h"
#include "tensorplay/pipelining/runtime/detail/remote_error.h"
#include "tensorplay/schedules/errors.h"
#include "tensorplay/transport/tensor_descriptor.h"
#include "tensorplay/wire/pipeline_tag.h"

namespace tensorplay::pipelining::detail {

namespace {

using schedules::ScheduleError;

const char* const kPipeHint =
    "; build every rank's stages from the same model (widths, dtypes), the same example inputs "
    "and the same split (split_spec, split_policy or pipe_split() calls)";

/// A sent value matches what the receiver expects: dtype, dimensions and every size but the
/// batch (dimension 0, which may vary between microbatches).
bool fits(const TensorMeta& sent, const TensorMeta& expected) {
  if (sent.dtype != expected.dtype || sent.shape.size() != expected.shape.size()) return false;
  for (size_t d = 1; d < sent.shape.size(); ++d)
    if (sent.shape[d] != expected.shape[d]) return false;
  return true;
}

/// Throws when a stage sends what the rank hosting the next stage does not expect.
void check_boundaries(const std::vector<RankFacts>& facts, const AgreementContext& c) {
  std::map<int, std::pair<int, const RankFacts::Stage*>> by_stage;  // index -> (rank, stage)
  for (size_t r = 0; r < facts.size(); ++r)
    for (const RankFacts::Stage& s : facts[r].stages) by_stage[s.index] = {static_cast<int>(r), &s};
  for (const auto& [index, from] : by_stage) {
    auto to = by_stage.find(index + 1);
    if (to == by_stage.end()) continue;
    const std::vector<TensorMeta>& sent = from.second->outputs;
    const std::vector<TensorMeta>& expected = to->second.second->inputs;
    const std::string opening = c.name + ": on " + c.describe(to->second.first) + ", stage " +
                                std::to_string(index + 1) + " expects ";
    const std::string sender = "; " + c.describe(from.first) + " sends ";
    if (sent.size() != expected.size())
      throw ScheduleError(opening + std::to_string(expected.size()) + " tensors from stage " +
                          std::to_string(index) + sender + std::to_string(sent.size()) + kPipeHint);
    for (size_t i = 0; i < sent.size(); ++i) {
      if (fits(sent[i], expected[i])) continue;
      const std::string which = sent.size() > 1 ? " as its input " + std::to_string(i) : "";
      throw ScheduleError(opening + compact_string(expected[i]) + which + " from stage " +
                          std::to_string(index) + sender + compact_string(sent[i]) + kPipeHint);
    }
  }
}

std::vector<std::vector<std::string>> order_rows(const std::string& text) {
  std::vector<std::vector<std::string>> rows;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream words(line);
    rows.emplace_back();
    for (std::string w; words >> w;) rows.back().push_back(w);
  }
  return rows;
}

/// The first action where two ranks' orders differ, in words.
std::string order_difference(const std::string& a, const std::string& a_rank, const std::string& b,
                             const std::string& b_rank) {
  const auto x = order_rows(a), y = order_rows(b);
  for (size_t r = 0; r < std::max(x.size(), y.size()); ++r) {
    static const std::vector<std::string> kNone;
    const auto& u = r < x.size() ? x[r] : kNone;
    const auto& v = r < y.size() ? y[r] : kNone;
    for (size_t i = 0; i < std::max(u.size(), v.size()); ++i) {
      if (i < u.size() && i < v.size() && u[i] == v[i]) continue;
      auto at = [i](const std::vector<std::string>& row) {
        return i < row.size() ? row[i] : std::string("nothing");
      };
      return "in the order of schedule rank " + std::to_string(r) + ", action " +
             std::to_string(i) + " is " + at(u) + " on " + a_rank + " and " + at(v) + " on " +
             b_rank;
    }
  }
  return "the orders differ";
}

/// Throws when the ranks' options that shape every step disagree (each rank compared with 0).
void check_options(const std::vector<RankFacts>& facts, const AgreementContext& c) {
  for (size_t r = 1; r < facts.size(); ++r) {
    const int other = static_cast<int>(r);
    if (facts[r].has_loss != facts[0].has_loss) {
      const int with = facts[0].has_loss ? 0 : other, without = facts[0].has_loss ? other : 0;
      throw ScheduleError(c.name + ": " + c.describe(with) + " has a loss function and " +
                          c.describe(without) +
                          " has none; pass the same loss_fn (or ScheduleOptions::"
                          "outputs_loss_fn) on every rank");
    }
    if (facts[r].scale_grads != facts[0].scale_grads)
      throw ScheduleError(c.name +
                          ": ranks disagree on ScheduleOptions::scale_grads: " + c.describe(0) +
                          " has " + (facts[0].scale_grads ? "true" : "false") + ", " +
                          c.describe(other) + " has " + (facts[r].scale_grads ? "true" : "false"));
  }
}

}  // namespace

std::string order_text(const schedules::PipelineOrder& order) {
  std::string text;
  for (const schedules::RankOrder& row : order) text += schedules::to_string(row) + '\n';
  return text;
}

void check_built_alike(const std::vector<RankFacts>& facts, const AgreementContext& c) {
  if (facts.empty()) return;
  check_options(facts, c);
  // Pipes are compared with the first rank's that has one; orders with rank 0's.
  int ref = -1, other = -1, order_other = -1;
  for (size_t r = 0; r < facts.size(); ++r) {
    if (facts[r].pipe_hash == 0) continue;
    if (ref < 0)
      ref = static_cast<int>(r);
    else if (other < 0 && facts[r].pipe_hash != facts[ref].pipe_hash)
      other = static_cast<int>(r);
  }
  for (size_t r = 1; r < facts.size() && order_other < 0; ++r)
    if (facts[r].order_hash != facts[0].order_hash) order_other = static_cast<int>(r);
  std::vector<RankDetail> detail;
  if (other >= 0 || order_other >= 0)
    for (const std::string& bytes : c.gather_detail())
      detail.push_back(decode_as<RankDetail>(
          bytes, "rank " + std::to_string(detail.size()) + "'s construction details"));
  PipeDigest a, b;
  if (other >= 0) {
    a = PipeDigest::decode(detail.at(ref).pipe);
    b = PipeDigest::decode(detail.at(other).pipe);
    if (std::string d = cut_difference(a, c.describe(ref), b, c.describe(other)); !d.empty())
      throw ScheduleError(c.name + ": the ranks split the model differently: " + d + kPipeHint);
  }
  check_boundaries(facts, c);
  if (order_other >= 0)
    throw ScheduleError(c.name + ": the ranks run different orders: " +
                        order_difference(detail.at(0).order, c.describe(0),
                                         detail.at(order_other).order, c.describe(order_other)) +
                        "; pass the same ScheduleOptions::order (or none) on every rank");
  if (other >= 0) {
    std::string d = first_difference(a, c.describe(ref), b, c.describe(other));
    throw ScheduleError(c.name + ": the ranks built different pipes: " +
                        (d.empty() ? "their digests differ" : d) + kPipeHint);
  }
}

RankFacts ProcessRanks::facts_of_this_rank(bool wants_nccl) const {
  RankFacts f;
  f.kind = std::string(schedules::schedule_name(spec_.kind));
  f.n_microbatches = spec_.n_microbatches;
  f.num_stages = spec_.placement.num_stages;
  f.stages_per_rank = spec_.placement.stages_per_rank;
  f.has_loss = spec_.loss_fn != nullptr || spec_.options.outputs_loss_fn != nullptr;
  f.scale_grads = spec_.options.scale_grads;
  f.wants_nccl = wants_nccl;
  f.order_hash = digest_hash(order_text(spec_.placement.order));
  if (const PipeDigest* pipe = pipe_digest()) f.pipe_hash = pipe->hash();
  for (const auto& s : spec_.stages)
    f.stages.push_back({s->stage_index(), s->input_meta(), s->output_meta()});
  return f;
}

std::vector<RankFacts> ProcessRanks::meet(const RemoteError& local_error, bool wants_nccl) {
  const std::string name(schedules::schedule_name(spec_.kind));
  RankFacts mine;
  if (local_error.empty())
    mine = facts_of_this_rank(wants_nccl);
  else
    mine.error = local_error;
  std::vector<RankFacts> facts;
  for (auto& c : runtime_->exchange(group_ranks_, encode_message(mine), {}, name + " construction"))
    facts.push_back(decode_as<RankFacts>(
        c.bytes, "rank " + std::to_string(facts.size()) + "'s construction facts"));
  AgreementContext context{name, [this](int r) { return describe_rank(r); },
                           [this, &name] { return gather_detail(name); }};
  check_agreement(facts, context);
  return facts;
}

std::vector<std::string> ProcessRanks::gather_detail(const std::string& name) const {
  const PipeDigest* pipe = pipe_digest();
  RankDetail mine{pipe ? pipe->encode() : "", order_text(spec_.placement.order)};
  std::vector<std::string> out;
  for (auto& c :
       runtime_->exchange(group_ranks_, encode_message(mine), {}, name + " construction details"))
    out.push_back(std::move(c.bytes));
  return out;
}

const PipeDigest* ProcessRanks::pipe_digest() const {
  const PipeDigest* first = spec_.stages.front()->pipe_digest().get();
  for (const auto& s : spec_.stages)
    if (!s->pipe_digest() || *s->pipe_digest() != *first) return nullptr;
  return first;
}

void ProcessRanks::check_agreement(const std::vector<RankFacts>& facts,
                                   const AgreementContext& context) {
  // Every rank runs these checks on the same gathered facts, so all fail alike, none hangs.
  // A rank that could not build its share says why; every rank reports the first such rank.
  for (size_t r = 0; r < facts.size(); ++r)
    if (!facts[r].error.empty())  // thrown here with the type it had there
      throw_remote_error(describe_rank(static_cast<int>(r)), facts[r].error);
  check_same_counts(facts);
  check_placement(facts);
  check_built_alike(facts, context);
}

void ProcessRanks::check_same_counts(const std::vector<RankFacts>& facts) const {
  // Each rank is compared with rank 0, so every rank words a disagreement the same way.
  const std::string name(schedules::schedule_name(spec_.kind));
  const RankFacts& root = facts.at(0);
  const std::string root_who = describe_rank(0);
  auto differ = [&](const std::string& what, int mine, int theirs, const std::string& who) {
    return std::invalid_argument(name + ": ranks disagree on " + what + ": " + root_who + " has " +
                                 std::to_string(mine) + ", " + who + " has " +
                                 std::to_string(theirs));
  };
  for (size_t r = 0; r < facts.size(); ++r) {
    const RankFacts& o = facts[r];
    const std::string who = describe_rank(static_cast<int>(r));
    if (o.kind != root.kind)
      throw std::invalid_argument(name + ": " + who + " runs " + o.kind + ", " + root_who +
                                  " runs " + root.kind +
                                  "; every rank must construct the same schedule");
    if (o.n_microbatches != root.n_microbatches)
      throw differ("n_microbatches", root.n_microbatches, o.n_microbatches, who);
    if (o.num_stages != root.num_stages)
      throw differ("the stage count", root.num_stages, o.num_stages, who);
    if (o.stages_per_rank != root.stages_per_rank)
      throw differ("stages_per_rank", root.stages_per_rank, o.stages_per_rank, who);
  }
}

void ProcessRanks::check_placement(const std::vector<RankFacts>& facts) const {
  const std::string name(schedules::schedule_name(spec_.kind));
  std::map<int, int> built_on;  // stage -> rank
  for (size_t r = 0; r < facts.size(); ++r)
    for (const RankFacts::Stage& s : facts[r].stages) {
      auto [it, fresh] = built_on.emplace(s.index, static_cast<int>(r));
      if (!fresh)
        throw std::invalid_argument(name + ": stage " + std::to_string(s.index) + " is built on " +
                                    describe_rank(it->second) + " and on " +
                                    describe_rank(static_cast<int>(r)) +
                                    "; each stage belongs to exactly one rank");
    }
  check_pipeline_limits(name, spec_.placement.num_stages,
                        spec_.n_microbatches);  // what transfer keys hold
  if (static_cast<int>(group_ranks_.size()) != spec_.placement.ranks)
    throw std::invalid_argument(
        name + ": " + std::to_string(spec_.placement.num_stages) + " stages at " +
        std::to_string(spec_.placement.stages_per_rank) + " per rank need " +
        std::to_string(spec_.placement.ranks) + " ranks, but the process group has " +
        std::to_string(group_ranks_.size()) + " (WORLD_SIZE or the group passed to build_stage)");
  for (int s = 0; s < spec_.placement.num_stages; ++s) {
    auto it = built_on.find(s);
    if (it == built_on.end())
      throw std::invalid_argument(name + ": stage " + std::to_string(s) +
                                  " is built on no rank (it belongs on " +
                                  describe_rank(spec_.placement.stage_to_rank[s]) + ")");
    if (it->second != spec_.placement.stage_to_rank[s])
      throw std::invalid_argument(name + ": " + describe_rank(it->second) + " built stage " +
                                  std::to_string(s) + ", which " + name + " places on " +
                                  describe_rank(spec_.placement.stage_to_rank[s]) +
                                  " (see stages_of_rank)");
  }
}

}  // namespace tensorplay::pipelining::detail
