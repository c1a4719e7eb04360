// UCX's process-wide options set directly: its environment was read when its libraries loaded.
#include "tensorplay/transport/ucx_process_settings.h"

#include <dlfcn.h>
#include <ucm/api/ucm.h>
#include <ucs/config/global_opts.h>

#include <stdexcept>

namespace tensorplay::transport {
namespace {

/// UCM's options: libucm comes with libucp, looked up at run time so that nothing links it.
ucm_global_config_t* ucm_options() {
  return static_cast<ucm_global_config_t*>(dlsym(RTLD_DEFAULT, "ucm_global_opts"));
}

bool is_off(const std::string& value) {
  return value == "n" || value == "no" || value == "0" || value == "off" || value == "false";
}

}  // namespace

void apply_ucx_settings(const std::vector<std::pair<std::string, std::string>>& settings) {
  for (const auto& [name, value] : settings) {
    if (name == "UCX_VFS_ENABLE") {
      ucs_global_opts.vfs_enable = is_off(value) ? 0 : 1;
    } else if (name == "UCX_MEM_EVENTS") {
      if (ucm_global_config_t* ucm = ucm_options()) ucm->enable_events = is_off(value) ? 0 : 1;
    } else {
      throw std::invalid_argument("apply_ucx_settings: " + name +
                                  " is not a setting it knows (UCX_VFS_ENABLE, UCX_MEM_EVENTS)");
    }
  }
}

bool ucx_vfs_enabled() { return ucs_global_opts.vfs_enable != 0; }

bool ucx_mem_events_enabled() {
  const ucm_global_config_t* ucm = ucm_options();
  return ucm && ucm->enable_events != 0;
}

}  // namespace tensorplay::transport
