// UCX settings of the whole process that tp-launch makes through the environment, made by the
// program itself where nothing set them (a rank started by srun, mpirun or by hand).
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace tensorplay::transport {

/// Applies UCX settings to this process, as (variable, value) pairs; UCX reads its environment
/// when its libraries load, before the program runs, so these set UCX's own options instead.
/// Known: `UCX_VFS_ENABLE=n` (UCX's debugging file system registers endpoints from its own
/// thread, racing the progress thread under load: an assertion in vfs_obj.c aborts a rank) and
/// `UCX_MEM_EVENTS=no` (memory-event hooks patch mmap/munmap/brk and stay patched after UCX closed:
/// rare heap corruption at exit; shared memory, CMA and tcp do not need them). Call before the
/// first UcxChannel. Throws std::invalid_argument naming a setting it does not know.
void apply_ucx_settings(const std::vector<std::pair<std::string, std::string>>& settings);

/// Whether UCX's debugging file system is on in this process (UCX_VFS_ENABLE).
bool ucx_vfs_enabled();
/// Whether UCX's memory-event hooks are allowed in this process (UCX_MEM_EVENTS).
bool ucx_mem_events_enabled();

}  // namespace tensorplay::transport
