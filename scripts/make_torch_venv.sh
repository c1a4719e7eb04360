#!/usr/bin/env bash
# Makes the Python virtual environment with PyTorch and transformers that the benchmarks' PyTorch
# peers and the checks against transformers (CTest names containing `transformers`) use.
#
# Usage: scripts/make_torch_venv.sh [DIR]
#   DIR defaults to $TENSORPLAY_TORCH_VENV, else build/bench/torch-venv (where the benchmarks and
#   the tests look when TENSORPLAY_TORCH_VENV is unset). PYTHON picks the interpreter (python3).
# PyTorch comes from its CPU-only index when that index answers (a few hundred MB); otherwise from
# PyPI, whose Linux wheels bundle the CUDA libraries (several GB). Nothing else is downloaded: the
# checks build their models from a config with random weights.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:-${TENSORPLAY_TORCH_VENV:-$root/build/bench/torch-venv}}
python=${PYTHON:-python3}
cpu_index=https://download.pytorch.org/whl/cpu

if [ ! -x "$dir/bin/python" ]; then
  echo "make_torch_venv: creating $dir"
  "$python" -m venv "$dir"
fi
py="$dir/bin/python"
"$py" -m pip install --quiet --upgrade pip

if ! "$py" -c 'import torch' 2>/dev/null; then
  if "$py" - "$cpu_index/torch/" <<'EOF' 2>/dev/null; then
import sys, urllib.request
urllib.request.urlopen(sys.argv[1], timeout=10)
EOF
    echo "make_torch_venv: installing torch from the CPU-only index"
    "$py" -m pip install torch --index-url "$cpu_index"
  else
    echo "make_torch_venv: $cpu_index does not answer; installing torch from PyPI (with CUDA, GB)"
    "$py" -m pip install torch
  fi
fi
"$py" -m pip install transformers safetensors numpy tensorboard

"$py" -c 'import torch, transformers, safetensors
print("make_torch_venv: torch", torch.__version__, "transformers", transformers.__version__)'
echo "make_torch_venv: ready; for a folder other than build/bench/torch-venv:"
echo "  export TENSORPLAY_TORCH_VENV=$dir"
