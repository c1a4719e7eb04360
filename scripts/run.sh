#!/usr/bin/env bash
# The main job: installs what is missing, builds train_gpt, and trains a character-level GPT cut
# into pipeline stages (ScheduleZBVZeroBubble, embedded single-process runtime) on the license
# texts every Debian system ships; prints a line per step, a summary of what the pipeline did,
# writes a timeline of one step and checkpoints to train_gpt_run/, and ends with generated text.
# Extra arguments go to train_gpt (`bash scripts/run.sh --help` lists them; `--resume` continues).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build --target train_gpt -j "$(nproc)"
./build/examples/train_gpt/train_gpt "$@"
