// Recomputation policies: parsing, and choosing the modules of a stage they recompute.
#include "tensorplay/pipelining/recompute.h"

#include <algorithm>
#include <map>
#include <memory>
#include <stdexcept>

namespace tensorplay::pipelining {

namespace {

const char* const kForms =
    "none, full, every:K (every K-th block, K >= 1) or type:Name[,Name...] (modules of those "
    "types)";

bool inside(const std::string& path, const std::string& outer) {
  return outer.empty() || (path.size() > outer.size() &&
                           path.compare(0, outer.size(), outer) == 0 && path[outer.size()] == '.');
}

std::string parent_of(const std::string& path) {
  size_t dot = path.rfind('.');
  return dot == std::string::npos ? std::string() : path.substr(0, dot);
}

std::string leaf_of(const std::string& path) {
  size_t dot = path.rfind('.');
  return dot == std::string::npos ? path : path.substr(dot + 1);
}

}  // namespace

RecomputePolicy RecomputePolicy::every_kth(int k) {
  if (k < 1)
    throw std::invalid_argument("recompute every:" + std::to_string(k) +
                                ": K must be at least 1 (every:1 is full)");
  RecomputePolicy policy;
  policy.mode = Mode::EveryKth;
  policy.every = k;
  return policy;
}

RecomputePolicy RecomputePolicy::by_type(std::vector<std::string> types) {
  if (types.empty())
    throw std::invalid_argument("recompute by type: name at least one module type");
  for (const auto& t : types)
    if (t.empty()) throw std::invalid_argument("recompute by type: a type name is empty");
  RecomputePolicy policy;
  policy.mode = Mode::ByType;
  policy.types = std::move(types);
  return policy;
}

RecomputePolicy RecomputePolicy::parse(const std::string& text) {
  if (text == "none") return none();
  if (text == "full") return full();
  if (text.rfind("every:", 0) == 0) {
    const std::string k = text.substr(6);
    size_t used = 0;
    int value = 0;
    try {
      value = std::stoi(k, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (k.empty() || used != k.size())
      throw std::invalid_argument("recompute '" + text + "': K of every:K must be a whole number");
    return every_kth(value);
  }
  if (text.rfind("type:", 0) == 0) {
    std::vector<std::string> types;
    std::string rest = text.substr(5);
    size_t start = 0;
    while (start <= rest.size()) {
      size_t comma = rest.find(',', start);
      if (comma == std::string::npos) comma = rest.size();
      types.push_back(rest.substr(start, comma - start));
      start = comma + 1;
    }
    return by_type(std::move(types));
  }
  throw std::invalid_argument("recompute '" + text + "': expected " + kForms);
}

std::string RecomputePolicy::to_string() const {
  switch (mode) {
    case Mode::None:
      return "none";
    case Mode::Full:
      return "full";
    case Mode::EveryKth:
      return "every:" + std::to_string(every);
    case Mode::ByType: {
      std::string text = "type:";
      for (size_t i = 0; i < types.size(); ++i) text += (i ? "," : "") + types[i];
      return text;
    }
  }
  return "none";
}

std::vector<std::string> recomputed_module_paths(nn::Module& root, const RecomputePolicy& policy) {
  std::vector<std::string> chosen, blocks;
  if (policy.mode == RecomputePolicy::Mode::None) return chosen;
  auto modules = root.named_modules();
  std::map<std::string, std::string> type_of;
  for (const auto& [path, m] : modules) type_of[path] = m->type_name();
  auto within = [](const std::vector<std::string>& outers, const std::string& path) {
    return std::any_of(outers.begin(), outers.end(),
                       [&](const std::string& o) { return inside(path, o); });
  };
  for (const auto& [path, m] : modules) {
    if (path.empty() || within(chosen, path)) continue;
    if (policy.mode == RecomputePolicy::Mode::ByType) {
      if (std::find(policy.types.begin(), policy.types.end(), m->type_name()) != policy.types.end())
        chosen.push_back(path);
      continue;
    }
    const std::string& parent_type = type_of[parent_of(path)];
    if ((parent_type != "ModuleList" && parent_type != "Sequential") || within(blocks, path))
      continue;
    blocks.push_back(path);  // an outermost block
    bool pick = policy.mode == RecomputePolicy::Mode::Full;
    if (policy.mode == RecomputePolicy::Mode::EveryKth) {
      const std::string leaf = leaf_of(path);
      const bool number =
          !leaf.empty() && leaf.size() < 10 &&
          std::all_of(leaf.begin(), leaf.end(), [](char c) { return c >= '0' && c <= '9'; });
      pick = number && (std::stoi(leaf) + 1) % policy.every == 0;
    }
    if (pick) chosen.push_back(path);
  }
  return chosen;
}

}  // namespace tensorplay::pipelining
