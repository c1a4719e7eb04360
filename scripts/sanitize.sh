#!/usr/bin/env bash
# Builds the test suite with AddressSanitizer and UndefinedBehaviorSanitizer (CPU only) and runs
# it. UBSan stops at the first error, so a clean run means no report.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DTENSORPLAY_SANITIZE=ON \
  -DTENSORPLAY_CUDA=OFF -DTENSORPLAY_BUILD_BENCH=OFF -DTENSORPLAY_BUILD_EXAMPLES=OFF
cmake --build build-asan -j "$(nproc)"
ctest --test-dir build-asan --output-on-failure -j "$(nproc)" -L unit "$@"
