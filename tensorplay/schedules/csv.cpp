#include "tensorplay/schedules/csv.h"

#include <fstream>
#include <sstream>
#include <stdexcept>

namespace tensorplay::schedules {
namespace {

// Splits one CSV row into cells, honouring double quotes.
std::vector<std::string> split_row(std::string_view line) {
  std::vector<std::string> cells(1);
  bool quoted = false;
  for (std::size_t i = 0; i < line.size(); ++i) {
    char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        cells.back() += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        cells.back() += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      cells.emplace_back();
    } else {
      cells.back() += c;
    }
  }
  return cells;
}

}  // namespace

std::string dump_csv(const PipelineOrder& order) {
  std::string text;
  for (const RankOrder& rank : order) {
    for (std::size_t i = 0; i < rank.size(); ++i) {
      if (i > 0) text += ',';
      text += to_string(rank[i]);
    }
    text += '\n';
  }
  return text;
}

PipelineOrder parse_csv(std::string_view text, CsvFormat format) {
  PipelineOrder order;
  std::size_t row = 0;
  while (!text.empty()) {
    std::size_t end = text.find('\n');
    std::string_view line = text.substr(0, end);
    text = end == std::string_view::npos ? std::string_view() : text.substr(end + 1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    RankOrder rank;
    std::vector<std::string> cells = split_row(line);
    for (std::size_t col = 0; col < cells.size(); ++col) {
      if (cells[col].find_first_not_of(" \t") == std::string::npos) continue;
      Action action;
      try {
        action = parse_action(cells[col]);
      } catch (const std::invalid_argument& e) {
        throw std::invalid_argument("CSV row " + std::to_string(row) + " (rank " +
                                    std::to_string(row) + "), column " + std::to_string(col) +
                                    ": " + e.what());
      }
      if (format == CsvFormat::ComputeOnly && is_communication(action.kind)) {
        throw std::invalid_argument(
            "CSV row " + std::to_string(row) + ", column " + std::to_string(col) +
            ": expected a compute-only schedule but found communication action '" +
            to_string(action) + "'; load it with CsvFormat::WithCommunication");
      }
      rank.push_back(std::move(action));
    }
    order.push_back(std::move(rank));
    ++row;
  }
  return order;
}

void save_csv(const std::string& path, const PipelineOrder& order) {
  std::ofstream out(path, std::ios::binary);
  out << dump_csv(order);
  if (!out) throw std::runtime_error("cannot write CSV file '" + path + "'");
}

PipelineOrder load_csv(const std::string& path, CsvFormat format) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read CSV file '" + path + "': does it exist?");
  std::stringstream buffer;
  buffer << in.rdbuf();
  return parse_csv(buffer.str(), format);
}

}  // namespace tensorplay::schedules
