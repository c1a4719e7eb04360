// metrics.jsonl and loss.svg (run_metrics.h).
#include "run_metrics.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <vector>

namespace train_gpt {

std::string scalars_json(const StepScalars& s) {
  nlohmann::ordered_json j;
  j["step"] = s.step;
  j["loss"] = s.loss;
  if (s.val_loss) j["val_loss"] = *s.val_loss;
  j["lr"] = s.lr;
  j["tokens_per_second"] = s.tokens_per_second;
  if (s.bubble) j["bubble"] = *s.bubble;
  if (!s.peak_bytes.empty()) {
    nlohmann::ordered_json bytes = nlohmann::ordered_json::object();
    for (const auto& [rank, b] : s.peak_bytes) bytes[std::to_string(rank)] = b;
    j["peak_bytes"] = bytes;
  }
  return j.dump();
}

namespace {

// `dir`, the event files of the runs before this one removed when it starts over (`fresh`), as
// it truncates the JSON lines.
const std::string& without_old_event_files(const std::string& dir, bool fresh) {
  if (!fresh) return dir;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec))
    if (entry.path().filename().string().rfind("events.out.tfevents.", 0) == 0)
      std::filesystem::remove(entry.path(), ec);
  return dir;
}

}  // namespace

std::vector<std::pair<std::string, double>> scalar_tags(const StepScalars& s) {
  std::vector<std::pair<std::string, double>> tags = {{"loss", s.loss}};
  if (s.val_loss) tags.push_back({"val_loss", *s.val_loss});
  tags.push_back({"lr", s.lr});
  tags.push_back({"tokens_per_second", s.tokens_per_second});
  if (s.bubble) tags.push_back({"bubble", *s.bubble});
  for (const auto& [rank, bytes] : s.peak_bytes)
    tags.push_back({"peak_bytes/rank_" + std::to_string(rank), bytes});
  return tags;
}

MetricsFile::MetricsFile(const std::string& dir, bool fresh)
    : path_((std::filesystem::path(dir) / "metrics.jsonl").string()),
      events_(without_old_event_files(dir, fresh)) {
  std::ofstream out(path_, fresh ? std::ios::trunc : std::ios::app);
  if (!out) throw std::runtime_error("cannot write '" + path_ + "'");
}

void MetricsFile::add(const StepScalars& s) {
  std::ofstream out(path_, std::ios::app);
  out << scalars_json(s) << '\n';
  if (!out) throw std::runtime_error("cannot write '" + path_ + "'");
  events_.add_scalars(s.step, scalar_tags(s));
}

namespace {

struct Curve {
  std::vector<std::pair<double, double>> points;  // (step, loss), by step
};

std::string number(double v) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.4g", v);
  return text;
}

}  // namespace

void draw_loss_svg(const std::string& jsonl_path, const std::string& svg_path) {
  std::ifstream in(jsonl_path);
  if (!in) throw std::runtime_error("cannot read '" + jsonl_path + "'");
  std::map<int, double> train, val;  // the last line of each step counts
  std::string line;
  for (size_t number_of_line = 1; std::getline(in, line); ++number_of_line) {
    if (line.empty()) continue;
    nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.contains("step") || !j.contains("loss"))
      throw std::runtime_error("'" + jsonl_path + "' line " + std::to_string(number_of_line) +
                               " is not a step's JSON line (a damaged file?)");
    const int step = j["step"].get<int>();
    if (j["loss"].is_number()) train[step] = j["loss"].get<double>();
    if (j.contains("val_loss") && j["val_loss"].is_number())
      val[step] = j["val_loss"].get<double>();
    else
      val.erase(step);
  }
  Curve t, v;
  for (const auto& [step, loss] : train)
    if (std::isfinite(loss)) t.points.push_back({step, loss});
  for (const auto& [step, loss] : val)
    if (std::isfinite(loss)) v.points.push_back({step, loss});

  constexpr double kW = 640, kH = 360, kLeft = 60, kRight = 20, kTop = 30, kBottom = 40;
  double x0 = 1, x1 = 2, y0 = 0, y1 = 1;
  bool any = false;
  for (const Curve* c : {&t, &v})
    for (const auto& [x, y] : c->points) {
      if (!any) x0 = x1 = x, y0 = y1 = y;
      any = true;
      x0 = std::min(x0, x), x1 = std::max(x1, x), y0 = std::min(y0, y), y1 = std::max(y1, y);
    }
  if (x1 <= x0) x1 = x0 + 1;
  if (y1 <= y0) y1 = y0 + 1;
  y0 = std::max(0.0, y0 - 0.05 * (y1 - y0));
  const auto px = [&](double x) { return kLeft + (x - x0) / (x1 - x0) * (kW - kLeft - kRight); };
  const auto py = [&](double y) { return kTop + (y1 - y) / (y1 - y0) * (kH - kTop - kBottom); };

  std::string svg = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + number(kW) +
                    "\" height=\"" + number(kH) +
                    "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  svg += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  svg += "<text x=\"" + number(kLeft) + "\" y=\"18\">train_gpt: loss against steps</text>\n";
  // Axes with their ends labelled.
  svg += "<path d=\"M" + number(kLeft) + " " + number(kTop) + " V" + number(kH - kBottom) + " H" +
         number(kW - kRight) + "\" stroke=\"black\" fill=\"none\"/>\n";
  svg += "<text x=\"" + number(kLeft - 6) + "\" y=\"" + number(py(y1) + 4) +
         "\" text-anchor=\"end\">" + number(y1) + "</text>\n";
  svg += "<text x=\"" + number(kLeft - 6) + "\" y=\"" + number(py(y0) + 4) +
         "\" text-anchor=\"end\">" + number(y0) + "</text>\n";
  svg += "<text x=\"" + number(px(x0)) + "\" y=\"" + number(kH - kBottom + 16) +
         "\" text-anchor=\"middle\">" + number(x0) + "</text>\n";
  svg += "<text x=\"" + number(px(x1)) + "\" y=\"" + number(kH - kBottom + 16) +
         "\" text-anchor=\"middle\">" + number(x1) + "</text>\n";
  svg += "<text x=\"" + number((kLeft + kW - kRight) / 2) + "\" y=\"" + number(kH - 8) +
         "\" text-anchor=\"middle\">step</text>\n";
  const auto polyline = [&](const Curve& c, const char* colour, const char* name, double y) {
    if (c.points.empty()) return;
    std::string points;
    for (const auto& [x, value] : c.points) points += number(px(x)) + "," + number(py(value)) + " ";
    svg += "<polyline class=\"" + std::string(name) + "\" points=\"" + points + "\" stroke=\"" +
           colour + "\" stroke-width=\"1.5\" fill=\"none\"/>\n";
    svg += "<text x=\"" + number(kW - kRight - 130) + "\" y=\"" + number(y) + "\" fill=\"" +
           colour + "\">" + name + " loss</text>\n";
  };
  polyline(t, "#1f77b4", "training", kTop + 14);
  polyline(v, "#ff7f0e", "validation", kTop + 30);
  for (const auto& [x, value] : v.points)
    svg += "<circle cx=\"" + number(px(x)) + "\" cy=\"" + number(py(value)) +
           "\" r=\"3\" fill=\"#ff7f0e\"/>\n";
  svg += "</svg>\n";
  std::ofstream out(svg_path, std::ios::binary);
  out << svg;
  if (!out) throw std::runtime_error("cannot write '" + svg_path + "'");
}

}  // namespace train_gpt
