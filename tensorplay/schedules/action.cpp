#include "tensorplay/schedules/action.h"

#include <array>
#include <charconv>
#include <map>
#include <stdexcept>

namespace tensorplay::schedules {
namespace {

constexpr std::array<std::string_view, 12> kKindNames = {
    "F",      "I",      "W",      "B",       "OVERLAP_F_B", "SEND_F",
    "RECV_F", "SEND_B", "RECV_B", "UNSHARD", "RESHARD",     "REDUCE_GRAD"};

[[noreturn]] void bad_action(std::string_view text, std::string_view why) {
  throw std::invalid_argument("invalid action '" + std::string(text) + "': " + std::string(why) +
                              "; expected [stage][kind][microbatch] such as 2F0, 3SEND_F1 or "
                              "(0F7;7B3)OVERLAP_F_B, with kind one of F I W B SEND_F RECV_F "
                              "SEND_B RECV_B, or [stage][kind] such as 1UNSHARD, with kind one "
                              "of UNSHARD RESHARD REDUCE_GRAD");
}

std::string_view trim(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t' || text.back() == '\r')) {
    text.remove_suffix(1);
  }
  return text;
}

// Reads leading digits into `value`; returns how many characters were read.
std::size_t read_int(std::string_view text, int& value) {
  std::size_t n = 0;
  while (n < text.size() && text[n] >= '0' && text[n] <= '9') ++n;
  if (n == 0) return 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + n, value);
  if (ec != std::errc()) return 0;
  return n;
}

Action parse_simple(std::string_view original, std::string_view text) {
  int stage = 0;
  std::size_t used = read_int(text, stage);
  if (used == 0) bad_action(original, "it does not start with a stage number");
  text.remove_prefix(used);
  // Longest kind names first so that "SEND_F" is not read as a bare prefix.
  for (int k = static_cast<int>(kKindNames.size()) - 1; k >= 0; --k) {
    std::string_view name = kKindNames[k];
    if (name == "OVERLAP_F_B" || !text.starts_with(name)) continue;
    std::string_view rest = text.substr(name.size());
    int microbatch = 0;
    const auto kind = static_cast<ActionKind>(k);
    if (is_sharding(kind)) {
      if (!rest.empty()) bad_action(original, "a sharding action takes no microbatch");
      return make_action(stage, kind, 0);
    }
    if (rest.empty()) bad_action(original, "the microbatch number is missing");
    if (read_int(rest, microbatch) != rest.size()) {
      bad_action(original, "unexpected text after the kind");
    }
    return make_action(stage, kind, microbatch);
  }
  bad_action(original, "unknown action kind");
}

}  // namespace

std::size_t ActionHash::operator()(const Action& action) const noexcept {
  std::size_t h =
      static_cast<std::size_t>(static_cast<uint32_t>(action.stage)) * 0x9E3779B97F4A7C15ull;
  h ^= (static_cast<std::size_t>(static_cast<uint32_t>(action.microbatch)) << 8) +
       static_cast<std::size_t>(action.kind) + 0x7F4A7C15ull + (h << 6) + (h >> 2);
  for (const Action& sub : action.sub_actions) h = h * 31 + (*this)(sub);
  return h;
}

Action make_overlap(Action forward, Action backward) {
  Action action;
  action.stage = -1;
  action.kind = ActionKind::OverlapFB;
  action.microbatch = -1;
  action.sub_actions.push_back(forward);
  action.sub_actions.push_back(backward);
  return action;
}

Action SubActions::at(std::size_t i) const {
  if (i >= size_)
    throw std::out_of_range("sub-action " + std::to_string(i) + " of an action with " +
                            std::to_string(size_));
  return (*this)[i];
}

void SubActions::push_back(const Action& part) {
  if (size_ >= kCapacity)
    throw std::invalid_argument("an action holds at most " + std::to_string(kCapacity) +
                                " sub-actions (OVERLAP_F_B: a forward and a backward)");
  if (!part.sub_actions.empty())
    throw std::invalid_argument("a sub-action cannot have sub-actions of its own: " +
                                to_string(part));
  stages_[size_] = part.stage;
  microbatches_[size_] = part.microbatch;
  kinds_[size_] = part.kind;
  ++size_;
}

std::string_view kind_name(ActionKind kind) { return kKindNames[static_cast<std::size_t>(kind)]; }

std::string to_string(const Action& action) {
  if (action.kind == ActionKind::OverlapFB) {
    std::string text = "(";
    for (std::size_t i = 0; i < action.sub_actions.size(); ++i) {
      if (i > 0) text += ';';
      text += to_string(action.sub_actions[i]);
    }
    text += ")";
    text += kind_name(action.kind);
    return text;
  }
  std::string text = std::to_string(action.stage);
  text += kind_name(action.kind);
  if (!is_sharding(action.kind)) text += std::to_string(action.microbatch);
  return text;
}

Action parse_action(std::string_view text) {
  std::string_view original = text;
  text = trim(text);
  if (text.empty()) bad_action(original, "it is empty");
  if (text.front() != '(') return parse_simple(original, text);

  std::size_t close = text.find(')');
  if (close == std::string_view::npos) bad_action(original, "the '(' has no matching ')'");
  if (trim(text.substr(close + 1)) != kind_name(ActionKind::OverlapFB)) {
    bad_action(original, "only OVERLAP_F_B may hold sub-actions");
  }
  std::string_view inner = text.substr(1, close - 1);
  std::vector<Action> subs;
  while (!inner.empty()) {
    std::size_t semi = inner.find(';');
    std::string_view part = trim(inner.substr(0, semi));
    if (!part.empty()) subs.push_back(parse_simple(original, part));
    if (semi == std::string_view::npos) break;
    inner.remove_prefix(semi + 1);
  }
  if (subs.size() != 2 || subs[0].kind != ActionKind::Forward ||
      (subs[1].kind != ActionKind::FullBackward && subs[1].kind != ActionKind::BackwardInput)) {
    bad_action(original, "OVERLAP_F_B needs exactly a forward then a backward, as (0F7;7B3)");
  }
  return make_overlap(subs[0], subs[1]);
}

std::string to_string(const RankOrder& order) {
  std::string text;
  for (const Action& action : order) {
    if (!text.empty()) text += ' ';
    text += to_string(action);
  }
  return text;
}

RankOrder parse_rank_order(std::string_view text) {
  RankOrder order;
  std::size_t start = 0;
  for (std::size_t i = 0; i <= text.size(); ++i) {
    if (i == text.size() || text[i] == ' ' || text[i] == ',' || text[i] == '\n') {
      std::string_view token = trim(text.substr(start, i - start));
      if (!token.empty()) order.push_back(parse_action(token));
      start = i + 1;
    }
  }
  return order;
}

std::vector<int> stages_with_backward_after_each_forward(const RankOrder& order) {
  std::map<int, bool> each;  // stage -> every forward so far followed by its backward
  auto next_compute = [&](std::size_t i) -> const Action* {
    for (std::size_t j = i + 1; j < order.size(); ++j)
      if (is_compute(order[j].kind)) return &order[j];
    return nullptr;
  };
  for (std::size_t i = 0; i < order.size(); ++i) {
    const Action& a = order[i];
    if (!a.sub_actions.empty()) {
      for (const Action& sub : a.sub_actions)
        if (sub.kind == ActionKind::Forward) each[sub.stage] = false;
      continue;
    }
    if (a.kind != ActionKind::Forward) continue;
    const Action* next = next_compute(i);
    const bool followed = next != nullptr && is_backward_of(*next, a);
    auto [it, inserted] = each.emplace(a.stage, followed);
    if (!inserted) it->second = it->second && followed;
  }
  std::vector<int> out;
  for (const auto& [stage, ok] : each)
    if (ok) out.push_back(stage);
  return out;
}

}  // namespace tensorplay::schedules
