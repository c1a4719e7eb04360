// Page cache control for benchmarks that time reading files from storage: how many of a folder's
// file pages are resident (mincore), and dropping them (fsync, then POSIX_FADV_DONTNEED; no root).
#pragma once

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace bench {

/// Pages of a folder's regular files (recursively) and how many of them the page cache holds.
struct Residency {
  uint64_t pages = 0;
  uint64_t resident = 0;
  double fraction() const { return pages == 0 ? 0.0 : static_cast<double>(resident) / pages; }
};

namespace detail {

// Resident pages of the open file `fd` of `size` bytes (mapping it faults nothing in).
inline Residency file_residency(int fd, uint64_t size) {
  Residency r;
  if (size == 0) return r;
  const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  r.pages = (size + page - 1) / page;
  void* map = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
  if (map == MAP_FAILED) return r;
  std::vector<unsigned char> in_core(r.pages);
  if (::mincore(map, size, in_core.data()) == 0)
    for (unsigned char c : in_core) r.resident += c & 1;
  ::munmap(map, size);
  return r;
}

// Calls `each(fd, size)` on every regular file under `folder`, opened read-only.
template <typename Each>
void for_each_file(const std::string& folder, Each each) {
  for (const auto& entry : std::filesystem::recursive_directory_iterator(folder)) {
    if (!entry.is_regular_file()) continue;
    const int fd = ::open(entry.path().c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    each(fd, static_cast<uint64_t>(entry.file_size()));
    ::close(fd);
  }
}

}  // namespace detail

/// The page-cache residency of every regular file under `folder`.
inline Residency residency(const std::string& folder) {
  Residency total;
  detail::for_each_file(folder, [&](int fd, uint64_t size) {
    const Residency r = detail::file_residency(fd, size);
    total.pages += r.pages;
    total.resident += r.resident;
  });
  return total;
}

/// Writes back and drops every regular file under `folder` from the page cache, so the next
/// read comes from storage. Advisory: the kernel may keep pages (tmpfs keeps all); check with
/// residency() afterwards.
inline void drop_from_page_cache(const std::string& folder) {
  detail::for_each_file(folder, [](int fd, uint64_t) {
    ::fsync(fd);
    ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  });
}

}  // namespace bench
