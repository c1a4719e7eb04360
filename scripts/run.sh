#!/usr/bin/env bash
# The main job: installs what is missing, builds, and trains the seed example (two stages,
# Schedule1F1B, embedded single-process runtime). Extra arguments go to the example.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build --target seed_mlp -j "$(nproc)"
./build/examples/seed_mlp/seed_mlp "$@"
