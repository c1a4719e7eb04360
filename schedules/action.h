// Action IR: the unit of work a pipeline schedule orders (a forward, a backward part, an
// overlapped forward+backward pair, or a send/receive), with PyTorch-compatible text form.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tensorplay::schedules {

/// What an action does. Strings: F I W B OVERLAP_F_B SEND_F RECV_F SEND_B RECV_B.
enum class ActionKind : uint8_t {
  Forward,         ///< F: forward of one microbatch through one stage.
  BackwardInput,   ///< I: gradient with respect to the stage input only.
  BackwardWeight,  ///< W: gradient with respect to the stage weights (after its I).
  FullBackward,    ///< B: I and W in one pass.
  OverlapFB,       ///< OVERLAP_F_B: a forward and a full backward of two stages run as one.
  SendF,           ///< SEND_F: send the forward output of (stage, mb) to the next stage.
  RecvF,           ///< RECV_F: receive the forward input of (stage, mb).
  SendB,           ///< SEND_B: send the input gradient of (stage, mb) to the previous stage.
  RecvB,           ///< RECV_B: receive the output gradient of (stage, mb).
};

/// One scheduled action. For OverlapFB, `sub_actions` is {forward action, backward action} and
/// `stage`/`microbatch` are -1 (as in PyTorch, the container has no stage of its own).
struct Action {
  int stage = 0;
  ActionKind kind = ActionKind::Forward;
  int microbatch = 0;
  std::vector<Action> sub_actions;

  friend bool operator==(const Action& a, const Action& b) = default;
};

/// Hash usable in unordered containers.
struct ActionHash {
  std::size_t operator()(const Action& action) const noexcept;
};

/// One rank's ordered actions.
using RankOrder = std::vector<Action>;
/// Index = rank.
using PipelineOrder = std::vector<RankOrder>;

// -- constructors ---------------------------------------------------------------------------------

/// A compute or communication action on one stage and microbatch.
Action make_action(int stage, ActionKind kind, int microbatch);
/// An OVERLAP_F_B action running `forward` (kind F) and `backward` (kind B) together.
Action make_overlap(Action forward, Action backward);

// -- kinds ----------------------------------------------------------------------------------------

/// The kind's text: "F", "I", "W", "B", "OVERLAP_F_B", "SEND_F", "RECV_F", "SEND_B", "RECV_B".
std::string_view kind_name(ActionKind kind);
/// True for F, I, W, B and OVERLAP_F_B.
bool is_compute(ActionKind kind);
/// True for I and B: the actions that produce the gradient for the previous stage.
bool is_input_backward(ActionKind kind);
/// True for W and B: the actions that free the stashed activation of a microbatch.
bool frees_activation(ActionKind kind);

// -- text form ------------------------------------------------------------------------------------

/// PyTorch's form: "1F0", "0B3", "3SEND_F1", "(0F3;3B1)OVERLAP_F_B".
std::string to_string(const Action& action);
/// Inverse of to_string; throws std::invalid_argument naming the bad text.
Action parse_action(std::string_view text);
/// Space-separated actions, e.g. "0F0 0F1 0B0".
std::string to_string(const RankOrder& order);
/// Parses space- or comma-separated actions ("0F0 0F1 0B0").
RankOrder parse_rank_order(std::string_view text);

}  // namespace tensorplay::schedules
