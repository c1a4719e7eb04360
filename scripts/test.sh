#!/usr/bin/env bash
# Builds everything and runs the whole test suite, then the unit suite again under
# AddressSanitizer + UndefinedBehaviorSanitizer (scripts/sanitize.sh asan, its own build folder).
# Installs missing Debian packages first. GPU tests report themselves skipped when no device is
# present. TENSORPLAY_TEST_SANITIZE=0 leaves the sanitizer part out (CI runs it).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
build_dir=${BUILD_DIR:-build}
start=$SECONDS
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release ${CMAKE_ARGS:-}
cmake --build "$build_dir" -j "$(nproc)"
echo "test: build took $((SECONDS - start)) s"
start=$SECONDS
ctest --test-dir "$build_dir" --output-on-failure -j "$(nproc)" "$@"
echo "test: test suite took $((SECONDS - start)) s"
if [ "${TENSORPLAY_TEST_SANITIZE:-1}" != 0 ]; then
  TENSORPLAY_SKIP_SETUP=1 bash scripts/sanitize.sh asan
fi
