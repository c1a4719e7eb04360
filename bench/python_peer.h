// A Python interpreter with PyTorch for benchmarks that run a PyTorch peer script: one named by the
// environment, a virtual environment beside the benchmark (made when needed), or python3.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <string>

#include "bench_knobs.h"
#include "command_output.h"
#include "tensorplay/base/knobs.h"

namespace bench {

/// An interpreter that imports torch, or why there is none.
struct PythonPeer {
  std::string python;         ///< empty when torch is not available
  std::string torch_version;  ///< torch.__version__
  std::string problem;        ///< what went wrong and what to try, when `python` is empty
};

/// torch.__version__ as `python` reports it, or empty when it cannot import torch.
inline std::string torch_version_of(const std::string& python) {
  CommandOutput out =
      run_command(shell_quote(python) + " -c 'import torch; print(torch.__version__)' 2>/dev/null");
  return out.exit_code == 0 && !out.lines.empty() ? out.lines.back() : "";
}

/// The virtual environment for PyTorch peers: $TENSORPLAY_TORCH_VENV, else torch-venv beside this
/// executable (in the build tree, which the repository ignores).
inline std::filesystem::path torch_venv_dir() {
  if (std::string dir = tensorplay::knob_string(kTorchVenvKnob); !dir.empty()) return dir;
  return std::filesystem::path(self_executable()).parent_path() / "torch-venv";
}

/// Finds an interpreter that imports torch, in this order: $TENSORPLAY_PYTHON; the virtual
/// environment of torch_venv_dir(); python3 on the PATH; else makes that virtual environment and
/// installs pip's torch into it (several GB with its CUDA libraries, minutes; progress goes to
/// standard error). TENSORPLAY_TORCH_INSTALL=0 skips the install.
inline PythonPeer find_python_with_torch() {
  PythonPeer peer;
  auto accept = [&](const std::string& python) {
    peer.torch_version = torch_version_of(python);
    if (!peer.torch_version.empty()) peer.python = python;
    return !peer.python.empty();
  };
  if (std::string python = tensorplay::knob_string(kPythonKnob); !python.empty()) {
    if (!accept(python)) peer.problem = "TENSORPLAY_PYTHON=" + python + " cannot import torch";
    return peer;
  }
  const std::filesystem::path venv = torch_venv_dir();
  const std::string venv_python = (venv / "bin" / "python").string();
  if (std::filesystem::exists(venv_python) && accept(venv_python)) return peer;
  if (accept("python3")) return peer;

  if (!tensorplay::knob_bool(kTorchInstallKnob)) {
    peer.problem = "torch is not importable and TENSORPLAY_TORCH_INSTALL=0; install it with: " +
                   shell_quote(venv_python) + " -m pip install torch";
    return peer;
  }
  std::cerr << "installing PyTorch into " << venv.string()
            << " for the peer (pip install torch; minutes)" << std::endl;
  std::string make = "{ [ -x " + shell_quote(venv_python) + " ] || python3 -m venv " +
                     shell_quote(venv.string()) + "; } && " + shell_quote(venv_python) +
                     " -m pip install torch 1>&2";
  if (std::system(make.c_str()) != 0 || !accept(venv_python)) {
    peer.problem = "could not install torch into " + venv.string() +
                   " (see the pip output above); try: python3 -m venv " +
                   shell_quote(venv.string()) + " && " + shell_quote(venv_python) +
                   " -m pip install torch, or set TENSORPLAY_PYTHON to an interpreter with torch";
  }
  return peer;
}

}  // namespace bench
