// A measured profile of one model on one machine: per split-candidate segment compute times and
// bytes, the channel between ranks and how compute scales with threads; saved and loaded as JSON.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tensorplay::pipelining {

/// A segment's action times measured at a microbatch of `samples` samples (seconds).
struct SizedTimes {
  int64_t samples = 0;
  double forward = 0, input_backward = 0, weight_backward = 0, full_backward = 0;
};

/// One segment of the model: the nodes from one split candidate to the next. Times are seconds
/// per microbatch of Profile::microbatch_size samples; bytes are per microbatch where they say so.
struct SegmentProfile {
  std::string name;    ///< the split candidate it begins at ("blocks.3"); "" for the first segment
  double forward = 0;  ///< F
  double input_backward = 0;              ///< I
  double weight_backward = 0;             ///< W
  double full_backward = 0;               ///< B (one pass; may differ from I + W)
  double activation_bytes = 0;            ///< stashed from F to its backward, per microbatch
  double activation_bytes_recompute = 0;  ///< the same when the segment recomputes
  double parameter_bytes = 0;
  double gradient_bytes = 0;
  double optimizer_bytes = 0;  ///< optimizer state (AdamW: two moments)
  double output_bytes = 0;     ///< bytes crossing a cut right after it, per microbatch
  /// Seconds of each of its actions that do not shrink with the microbatch (kernel launches,
  /// dispatch): the planner scales only the rest with the microbatch size. Optional in JSON.
  double overhead = 0;
  /// Seconds of one optimizer step over its parameters (ProfileOptions::optimizer). Optional.
  double optimizer_seconds = 0;
  /// The same F, I, W and B measured at larger microbatches (ProfileOptions::
  /// larger_microbatches), ascending, each above Profile::microbatch_size. An action's time at
  /// another size is then piecewise linear through (0, overhead), the profiled size and these,
  /// continued along the last piece; empty: overhead plus the rest in proportion to the samples.
  /// Optional in JSON.
  std::vector<SizedTimes> larger;
};

/// A channel between two ranks: time of a transfer = latency + bytes / bandwidth.
struct ChannelProfile {
  std::string kind;      ///< "in_process", "ucx_shm", "ucx_tcp"
  double latency = 0;    ///< seconds
  double bandwidth = 0;  ///< bytes per second; 0: unbounded
};

/// Compute time of the whole model with `threads` product threads, relative to one thread.
struct ThreadScaling {
  int threads = 1;
  double speedup = 1.0;  ///< time with 1 thread / time with `threads`
};

/// The compute factor calibrated at a larger microbatch (Profile::larger_compute_factors).
struct SizedFactor {
  int64_t samples = 0;
  double compute_factor = 1;
};

/// A measured profile (pp::profile) or one written by hand (tests, other machines).
struct Profile {
  std::string model;  ///< what was measured, for messages
  std::string device = "cpu";
  int64_t microbatch_size = 1;  ///< samples of the measured microbatch; times scale linearly
  int cores = 1;                ///< cores of the measuring host
  /// Where the activation bytes come from ("host allocator: bytes live after each forward").
  std::string activation_bytes_source;
  std::vector<SegmentProfile> segments;  ///< in model order
  /// The in-process channel first, then those measured between processes ("ucx_shm",
  /// "ucx_tcp"); plan_channel() picks one for a plan.
  std::vector<ChannelProfile> channels;
  std::vector<ThreadScaling> threads;  ///< empty: compute does not scale with threads
  /// Seconds the runtime adds to each compute action (its messages and scheduling), found by
  /// calibrate_profile against a real run; 0 when not calibrated. Optional in JSON.
  double action_overhead = 0;
  /// How much longer compute takes while the ranks of one host run at once than the profile's
  /// segments measured alone (they share caches, memory bandwidth and the host's other load):
  /// the planner multiplies each action's compute by it when a host runs more than one rank.
  /// Found by calibrate_profile from the actions' measured durations; 1 when not calibrated.
  /// Optional in JSON.
  double compute_factor = 1;
  /// The compute factor calibrated at larger microbatches (calibrate_profile runs one at each
  /// of the segments' larger sizes), ascending, each above microbatch_size: how much slower
  /// compute runs in a pipeline than profiled depends on the microbatch (a small one's actions
  /// find their weights gone from the caches after the other stages' actions, a large one's
  /// compute hides more of it). Empty: compute_factor at every size. Optional in JSON.
  std::vector<SizedFactor> larger_compute_factors;

  /// The compute factor at microbatches of `samples`: linear in the samples between
  /// (microbatch_size, compute_factor) and the larger sizes' factors, flat past either end.
  double compute_factor_at(double samples) const;
  /// The segment names, in order (the first is "").
  std::vector<std::string> segment_names() const;
  /// The channel named `kind`; throws std::invalid_argument listing the profile's channels.
  const ChannelProfile& channel(const std::string& kind) const;
  /// Compute speedup at `threads` (interpolated between measured counts, flat past the last).
  double speedup(int threads) const;
  /// Throws std::invalid_argument naming the first bad field (no segments, negative times...).
  void check() const;
};

/// The profile as JSON text (format "tensorplay-profile", version 1).
std::string profile_to_json(const Profile& profile);
/// The inverse; throws std::invalid_argument naming a missing or mistyped field.
Profile profile_from_json(const std::string& text);
/// Writes the JSON to `path`; throws std::runtime_error when the file cannot be written.
void save_profile(const Profile& profile, const std::string& path);
/// Reads a profile saved by save_profile; errors name the file.
Profile load_profile(const std::string& path);

}  // namespace tensorplay::pipelining
