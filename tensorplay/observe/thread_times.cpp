// Scheduler statistics of this process's threads, read from /proc.
#include "tensorplay/observe/thread_times.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

namespace tensorplay::pipelining {
namespace {

std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) return {};
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

/// The thread whose folder is `dir` (/proc/self/task/<tid>); tid 0 when it cannot be read.
ThreadTimes read_thread(const std::filesystem::path& dir, int tid) {
  ThreadTimes t;
  if (!parse_schedstat(read_text(dir / "schedstat"), t)) return {};
  t.tid = tid;
  t.name = read_text(dir / "comm");
  while (!t.name.empty() && (t.name.back() == '\n' || t.name.back() == ' ')) t.name.pop_back();
  return t;
}

bool more_cpu(const ThreadTimes& a, const ThreadTimes& b) {
  return a.cpu_ns != b.cpu_ns ? a.cpu_ns > b.cpu_ns : a.tid < b.tid;
}

}  // namespace

bool parse_schedstat(const std::string& text, ThreadTimes& out) {
  long long cpu = 0, runnable = 0, slices = 0;
  if (std::sscanf(text.c_str(), "%lld %lld %lld", &cpu, &runnable, &slices) != 3) return false;
  out.cpu_ns = cpu;
  out.runnable_ns = runnable;
  out.slices = slices;
  return true;
}

ThreadTimes this_thread_times() {
  std::error_code error;
  const auto self =
      std::filesystem::read_symlink("/proc/thread-self", error);  // "<pid>/task/<tid>"
  if (error) return {};
  const int tid = std::atoi(self.filename().c_str());
  return read_thread(std::filesystem::path("/proc/thread-self"), tid);
}

std::vector<ThreadTimes> process_thread_times() {
  std::vector<ThreadTimes> out;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/task", error)) {
    const int tid = std::atoi(entry.path().filename().c_str());
    ThreadTimes t = read_thread(entry.path(), tid);
    if (t.tid != 0) out.push_back(std::move(t));
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.tid < b.tid; });
  return out;
}

std::vector<ThreadTimes> thread_times_since(const std::vector<ThreadTimes>& before,
                                            const std::vector<ThreadTimes>& after) {
  std::map<int, const ThreadTimes*> earlier;
  for (const ThreadTimes& t : before) earlier[t.tid] = &t;
  std::vector<ThreadTimes> out;
  for (ThreadTimes t : after) {
    if (auto it = earlier.find(t.tid); it != earlier.end()) {
      t.cpu_ns -= it->second->cpu_ns;
      t.runnable_ns -= it->second->runnable_ns;
      t.slices -= it->second->slices;
    }
    out.push_back(std::move(t));
  }
  std::sort(out.begin(), out.end(), more_cpu);
  return out;
}

std::vector<ThreadTimes> sum_by_name(const std::vector<ThreadTimes>& threads) {
  std::vector<ThreadTimes> busiest_first = threads;
  std::sort(busiest_first.begin(), busiest_first.end(), more_cpu);
  std::map<std::string, ThreadTimes> sums;
  for (const ThreadTimes& t : busiest_first) {
    auto [it, fresh] = sums.emplace(t.name, t);  // the busiest thread of a name seeds its sum
    if (fresh) continue;
    ThreadTimes& sum = it->second;
    sum.cpu_ns += t.cpu_ns;
    sum.runnable_ns += t.runnable_ns;
    sum.slices += t.slices;
  }
  std::vector<ThreadTimes> out;
  for (auto& [name, t] : sums) out.push_back(std::move(t));
  std::sort(out.begin(), out.end(), more_cpu);
  return out;
}

std::string thread_times_json(const std::vector<ThreadTimes>& threads) {
  std::map<std::string, int> counts;
  for (const ThreadTimes& t : threads) ++counts[t.name];
  std::ostringstream out;
  out << "[";
  bool first = true;
  for (const ThreadTimes& t : sum_by_name(threads)) {
    std::string name;
    for (char c : t.name)
      if (c != '"' && c != '\\' && static_cast<unsigned char>(c) >= 0x20) name += c;
    out << (first ? "" : ",") << "{\"name\":\"" << name << "\",\"threads\":" << counts[t.name]
        << ",\"cpu_ms\":" << static_cast<double>(t.cpu_ns) / 1e6
        << ",\"runnable_ms\":" << static_cast<double>(t.runnable_ns) / 1e6 << "}";
    first = false;
  }
  out << "]";
  return out.str();
}

}  // namespace tensorplay::pipelining
