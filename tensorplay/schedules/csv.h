// CSV interchange in PyTorch's format: one row per rank, one action per cell ("0F0,0F1,..."),
// either compute-only or with SEND/RECV actions.
#pragma once

#include <string>
#include <string_view>

#include "tensorplay/schedules/action.h"

namespace tensorplay::schedules {

/// Which actions a CSV may hold.
enum class CsvFormat {
  ComputeOnly,        ///< F, I, W, B, OVERLAP_F_B and the sharding actions (no SEND/RECV).
  WithCommunication,  ///< also SEND_F, RECV_F, SEND_B, RECV_B (PyTorch's "compute_comms").
};

/// The CSV text: rows separated by '\n', cells by ','. Empty ranks give empty rows.
std::string dump_csv(const PipelineOrder& order);
/// Parses CSV text (either line ending, empty cells skipped, quoted cells accepted). Throws
/// std::invalid_argument naming row and column on a bad cell, or a communication action in a
/// ComputeOnly CSV.
PipelineOrder parse_csv(std::string_view text, CsvFormat format = CsvFormat::ComputeOnly);

/// Writes dump_csv(order) to `path`; throws std::runtime_error when the file cannot be written.
void save_csv(const std::string& path, const PipelineOrder& order);
/// Reads and parses `path`; throws std::runtime_error when the file cannot be read.
PipelineOrder load_csv(const std::string& path, CsvFormat format = CsvFormat::ComputeOnly);

}  // namespace tensorplay::schedules
