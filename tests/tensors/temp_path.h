// Temporary files and folders for tests that write checkpoints (unique per process and call,
// because CTest runs test cases as parallel processes that share the temporary directory), and
// a byte damaged in place.
#pragma once

#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <string>

namespace test_files {

/// <temp dir>/tp_<pid>_<n>_<name>, a fresh name on every call.
inline std::string temp_path(const std::string& name) {
  static std::atomic<int> counter{0};
  std::string unique =
      "tp_" + std::to_string(::getpid()) + "_" + std::to_string(counter++) + "_" + name;
  return (std::filesystem::temp_directory_path() / unique).string();
}

/// A fresh, empty folder under the temporary directory, removed with everything in it at the end
/// of the test.
struct TempDir {
  TempDir() : path(temp_path("dir")) {
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string path;
};

/// Flips bits of the byte at `at` of file `path`, in place (xor 0x5a).
inline void flip_byte(const std::string& path, std::streamoff at) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(at);
  char c = 0;
  f.get(c);
  f.seekp(at);
  f.put(static_cast<char>(c ^ 0x5a));
}

}  // namespace test_files
