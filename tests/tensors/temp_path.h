// Temporary file names for tests that write checkpoints: unique per process and call, because
// CTest runs test cases as parallel processes that share the temporary directory.
#pragma once

#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <string>

namespace test_files {

/// <temp dir>/tp_<pid>_<n>_<name>, a fresh name on every call.
inline std::string temp_path(const std::string& name) {
  static std::atomic<int> counter{0};
  std::string unique =
      "tp_" + std::to_string(::getpid()) + "_" + std::to_string(counter++) + "_" + name;
  return (std::filesystem::temp_directory_path() / unique).string();
}

}  // namespace test_files
