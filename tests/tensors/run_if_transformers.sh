#!/usr/bin/env bash
# Runs a check against transformers with the Python of the virtual environment that holds torch
# and transformers: $TENSORPLAY_TORCH_VENV, else DEFAULT_VENV (the benchmarks' torch-venv).
# Without one, exits 77, which CTest reports as skipped, saying why; nothing is installed.
# Usage: run_if_transformers.sh DEFAULT_VENV SCRIPT [ARGS...]
set -u
venv=${TENSORPLAY_TORCH_VENV:-$1}
shift
python=$venv/bin/python
if [ ! -x "$python" ]; then
  echo "no virtual environment at $venv (make one with scripts/make_torch_venv.sh," \
       "or set TENSORPLAY_TORCH_VENV): checks against transformers skipped"
  exit 77
fi
if ! problem=$("$python" -c 'import torch, transformers, safetensors' 2>&1); then
  echo "$python cannot import torch, transformers and safetensors (${problem##*$'\n'});" \
       "run scripts/make_torch_venv.sh: checks against transformers skipped"
  exit 77
fi
exec "$python" "$@"
