// parallelize_module: resolve the plan's paths, agree across the group, check, then apply.
#include "tensorplay/distributed/tensor_parallel/parallelize_module.h"

#include <sstream>
#include <stdexcept>

namespace tensorplay::distributed::tensor_parallel {
namespace {

std::vector<std::string> split_path(const std::string& path) {
  std::vector<std::string> out;
  std::stringstream in(path);
  std::string part;
  while (std::getline(in, part, '.')) out.push_back(part);
  return out;
}

std::string join_path(const std::string& prefix, const std::string& name) {
  return prefix.empty() ? name : prefix + "." + name;
}

// Why `path` matched nothing: the deepest module reached and its children.
std::string explain_miss(nn::Module& root, const std::string& path) {
  std::shared_ptr<nn::Module> at = root.shared_from_this();
  std::string reached;
  for (const std::string& part : split_path(path)) {
    std::shared_ptr<nn::Module> next;
    for (const auto& [name, child] : at->named_children())
      if (name == part || (part == "*" && !next)) next = child;
    if (!next) break;
    reached = join_path(reached, part);
    at = next;
  }
  std::string children;
  for (const auto& [name, child] : at->named_children())
    children += (children.empty() ? "" : ", ") + name;
  return "parallelize_module: the plan names '" + path + "', which matches no module of the " +
         root.type_name() + " ('" + (reached.empty() ? std::string("<root>") : reached) + "', a " +
         at->type_name() +
         ", has children: " + (children.empty() ? std::string("none") : children) +
         "); fix the plan's path";
}

// Every member's view of the group and plan; throws when one differs from this member's.
void agree(const ProcessGroup& tp, const ParallelizePlan& plan) {
  std::string mine = "tp group ranks:";
  for (int r : tp.ranks()) mine += " " + std::to_string(r);
  mine += "\nplan:\n";
  for (const auto& entry : plan) mine += entry.path + " -> " + entry.style->describe() + "\n";
  const std::vector<std::string> all = tp.all_gather_bytes(mine);
  for (size_t i = 0; i < all.size(); ++i) {
    if (all[i] == mine) continue;
    throw std::invalid_argument("parallelize_module: rank " + std::to_string(tp.ranks()[i]) +
                                " of the tp group was given another group or plan than rank " +
                                std::to_string(tp.global_rank()) +
                                "; every member must pass the same mesh[\"tp\"] and "
                                "plan.\nrank " +
                                std::to_string(tp.ranks()[i]) + ":\n" + all[i] + "rank " +
                                std::to_string(tp.global_rank()) + ":\n" + mine);
  }
}

}  // namespace

std::vector<std::pair<std::string, std::shared_ptr<nn::Module>>> match_modules(
    nn::Module& module, const std::string& path) {
  std::vector<std::pair<std::string, std::shared_ptr<nn::Module>>> level = {
      {"", module.shared_from_this()}};
  for (const std::string& part : split_path(path)) {
    std::vector<std::pair<std::string, std::shared_ptr<nn::Module>>> next;
    for (const auto& [prefix, m] : level)
      for (const auto& [name, child] : m->named_children())
        if (part == "*" || part == name) next.emplace_back(join_path(prefix, name), child);
    level = std::move(next);
  }
  if (path.empty()) level.clear();
  return level;
}

void parallelize_module(nn::Module& module, const ProcessGroup& tp, const ParallelizePlan& plan) {
  if (tp.rank() < 0)
    throw std::invalid_argument(
        "parallelize_module: this process is not a member of the tp group it was given");
  agree(tp, plan);
  std::vector<
      std::pair<const PlanEntry*, std::vector<std::pair<std::string, std::shared_ptr<nn::Module>>>>>
      resolved;
  for (const auto& entry : plan) {
    if (!entry.style)
      throw std::invalid_argument("parallelize_module: the plan's entry '" + entry.path +
                                  "' has no style");
    auto found = match_modules(module, entry.path);
    if (found.empty()) throw std::invalid_argument(explain_miss(module, entry.path));
    for (const auto& [path, m] : found) entry.style->check(*m, path, tp);
    resolved.emplace_back(&entry, std::move(found));
  }
  for (const auto& [entry, found] : resolved)
    for (const auto& [path, m] : found) entry->style->apply(*m, path, tp);
}

}  // namespace tensorplay::distributed::tensor_parallel
