#!/usr/bin/env bash
# Sanitizer runs of the test suite (CPU only), each in its own build folder:
#   1. AddressSanitizer + UndefinedBehaviorSanitizer, every unit test (UBSan stops at the first
#      error, so a clean run means no report);
#   2. ThreadSanitizer, the actor, transport and misuse tests (stage actors, the UCX progress
#      thread, schedules stepped and destroyed while stages compute), with the suppressions in
#      scripts/tsan.supp for the libraries TSan cannot see into (each one explained there).
# `scripts/sanitize.sh asan` or `scripts/sanitize.sh tsan` runs one of them; the test command
# (scripts/test.sh, and so CI) runs the first.
# Built to cost little: -O1 with line tables only, no benchmarks, examples or CUDA, through
# ccache when it is installed. The docs checks are the main build's business and are left out.
set -euo pipefail
cd "$(dirname "$0")/.."
[ "${TENSORPLAY_SKIP_SETUP:-0}" = 1 ] || bash scripts/setup.sh
which=${1:-all}
common=(-G Ninja -DCMAKE_BUILD_TYPE=Debug "-DCMAKE_CXX_FLAGS_DEBUG=-O1 -g1" -DTENSORPLAY_CUDA=OFF
        -DTENSORPLAY_BUILD_BENCH=OFF -DTENSORPLAY_BUILD_EXAMPLES=OFF)
if command -v ccache >/dev/null; then common+=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
if [ "$which" = all ] || [ "$which" = asan ]; then
  start=$SECONDS
  cmake -S . -B build-asan "${common[@]}" -DTENSORPLAY_SANITIZE=ON
  cmake --build build-asan -j "$(nproc)"
  echo "sanitize: AddressSanitizer + UBSan build took $((SECONDS - start)) s"
  start=$SECONDS
  # UCX patches memory calls at run time, which ASan's interceptors must not meet.
  UCX_MEM_EVENTS=no UCX_VFS_ENABLE=n \
    ctest --test-dir build-asan --output-on-failure -j "$(nproc)" -L unit -E '^docs_'
  echo "sanitize: AddressSanitizer + UBSan unit suite took $((SECONDS - start)) s"
fi
if [ "$which" = all ] || [ "$which" = tsan ]; then
  cmake -S . -B build-tsan "${common[@]}" -DTENSORPLAY_TSAN=ON
  cmake --build build-tsan -j "$(nproc)" --target test_actors test_transport test_misuse
  # UCX intercepts memory calls by patching them at run time, which TSan's own interceptors
  # crash on at exit; its memory events are not needed here.
  export UCX_MEM_EVENTS=no UCX_VFS_ENABLE=n
  export TSAN_OPTIONS="suppressions=$PWD/scripts/tsan.supp halt_on_error=1 second_deadlock_stack=1"
  for test in actors/test_actors transport/test_transport misuse/test_misuse; do
    echo "sanitize: ThreadSanitizer: $test"
    timeout 1200 "build-tsan/tests/$test" "~[cuda]"
  done
fi
