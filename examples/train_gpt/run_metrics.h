// train_gpt's scalars a user can look at: one JSON line per step in metrics.jsonl (loss,
// validation loss, learning rate, tokens/s, bubble, peak bytes per rank), the same scalars in a
// TensorBoard event file, and loss.svg, training and validation loss against steps, drawn from
// the JSON lines at the end of a run.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "event_file.h"

namespace train_gpt {

/// One step's scalars.
struct StepScalars {
  int step = 0;
  double loss = 0;
  std::optional<double> val_loss;  ///< on the steps that validated
  double lr = 0;
  double tokens_per_second = 0;
  std::optional<double> bubble;      ///< measured from the step's message log
  std::map<int, double> peak_bytes;  ///< per rank this process hosts: the step's measured peak
};

/// The JSON line of `s`: {"step":..,"loss":..,"val_loss":..,"lr":..,"tokens_per_second":..,
/// "bubble":..,"peak_bytes":{"0":..}} (val_loss, bubble and peak_bytes only when known).
std::string scalars_json(const StepScalars& s);

/// The scalars of `s` as TensorBoard tags: loss, val_loss, lr, tokens_per_second, bubble and
/// peak_bytes/rank_R (those known).
std::vector<std::pair<std::string, double>> scalar_tags(const StepScalars& s);

/// Writes `dir`/metrics.jsonl: from scratch for a run starting at step 1, appended to for a
/// resumed one (a step run again after a restart is written again; the last line of a step
/// counts); and the same scalars to an event file of this run in `dir` (TensorBoard reads every
/// event file of a folder; a fresh run removes those of the runs before it).
class MetricsFile {
 public:
  MetricsFile(const std::string& dir, bool fresh);
  /// Appends the step's line and event, and flushes them.
  void add(const StepScalars& s);
  const std::string& path() const { return path_; }
  const std::string& events_path() const { return events_.path(); }

 private:
  std::string path_;
  EventFile events_;
};

/// Draws `svg_path` from the JSON lines of `jsonl_path`: training loss and validation loss
/// against steps, the last line of each step counting. Throws std::runtime_error when a file
/// cannot be read or written, or a line does not parse (naming the file and line).
void draw_loss_svg(const std::string& jsonl_path, const std::string& svg_path);

}  // namespace train_gpt
