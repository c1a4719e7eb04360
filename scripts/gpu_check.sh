#!/usr/bin/env bash
# GPU check in one go, for a machine with an NVIDIA GPU: configures a separate CUDA build
# (sm_90 by default), builds the tensors and transport tests and the benchmarks, runs every [cuda]
# test case (one process each, with a timeout), the whole tensors suite, and the benchmarks under
# build/bench, then prints a summary table last. Exit status 0 when nothing failed.
#
#   scripts/gpu_check.sh                     # from the repository root or anywhere
#   CUDA_ARCH=80 BUILD_DIR=/tmp/b JOBS=8 scripts/gpu_check.sh
#   BUILD_ALL=1 ...   # also build every other target (by default: test_tensors and bench/ only)
#
# Logs go to $GPU_CHECK_LOG_DIR (default: $OUT when set, else <build dir>/gpu-check).
set -uo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${BUILD_DIR:-$root/build-gpu}
arch=${CUDA_ARCH:-90}
jobs=${JOBS:-16}
test_timeout=${TEST_TIMEOUT:-120}
bench_timeout=${BENCH_TIMEOUT:-90}
budget=${BUDGET_SECONDS:-420}  # stop starting new work after this many seconds
logs=${GPU_CHECK_LOG_DIR:-${OUT:-$build/gpu-check}}
mkdir -p "$logs"

rows=()      # "kind|name|result|detail" lines for the summary table
failures=0
start=$SECONDS

note() { echo "gpu_check: $*" | tee -a "$logs/gpu_check.log"; }
row() {
  rows+=("$1|$2|$3|$4")
  if [ "$3" = FAIL ]; then failures=$((failures + 1)); fi
  return 0
}
over_budget() { [ $((SECONDS - start)) -ge "$budget" ]; }
# A timeout of at most $1 seconds that ends by the budget plus a minute, so the whole run (and the
# summary table) fits in the time it was given.
left() {
  local l=$((budget + 60 - (SECONDS - start)))
  [ "$l" -lt 1 ] && l=1
  [ "$l" -lt "$1" ] && echo "$l" || echo "$1"
}

print_table() {
  echo
  echo "==================== gpu_check summary ($((SECONDS - start)) s) ===================="
  printf '%-6s %-62s %-5s %s\n' KIND NAME RESULT DETAIL
  for r in "${rows[@]}"; do
    IFS='|' read -r kind name result detail <<<"$r"
    printf '%-6s %-62.62s %-5s %s\n' "$kind" "$name" "$result" "$detail"
  done
  echo "failures: $failures   logs: $logs"
}
trap print_table EXIT

# -- machine -----------------------------------------------------------------------------------
if command -v nvidia-smi >/dev/null 2>&1; then
  nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv,noheader \
    | tee "$logs/nvidia-smi.txt" | sed 's/^/gpu_check: gpu /'
  row env nvidia-smi ok "$(head -1 "$logs/nvidia-smi.txt")"
else
  note "nvidia-smi not found: the tests will report no device"
  row env nvidia-smi FAIL "not found"
fi

# -- packages ----------------------------------------------------------------------------------
missing=()
for p in libcaf-dev libucx-dev catch2 libspdlog-dev libopenblas-dev cmake; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  note "missing packages: ${missing[*]}; running scripts/setup.sh"
  if ! "$root/scripts/setup.sh" >"$logs/setup.log" 2>&1; then
    row env packages FAIL "setup.sh failed (see setup.log); missing ${missing[*]}"
    exit 1
  fi
fi

# -- configure and build -----------------------------------------------------------------------
generator=()
command -v ninja >/dev/null 2>&1 && generator=(-G Ninja)
nvcc=/usr/local/cuda/bin/nvcc
[ -x "$nvcc" ] || nvcc=$(command -v nvcc || true)
note "configuring $build (CUDA architectures $arch)"
if ! cmake -S "$root" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
    -DTENSORPLAY_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="$arch" ${nvcc:+-DCMAKE_CUDA_COMPILER=$nvcc} \
    -DTENSORPLAY_BUILD_EXAMPLES=OFF >"$logs/configure.log" 2>&1; then
  tail -20 "$logs/configure.log"
  row build configure FAIL "see configure.log"
  exit 1
fi
row build configure ok "arch $arch"

# The tensors tests decide the run: build them first, then the rest (keep going past failures in
# layers that do not build, so the CUDA results still come out).
build_start=$SECONDS
if ! cmake --build "$build" -j "$jobs" --target test_tensors >"$logs/build_tests.log" 2>&1; then
  grep -E "error|FAILED" "$logs/build_tests.log" | head -20
  row build test_tensors FAIL "see build_tests.log"
  exit 1
fi
row build test_tensors ok "$((SECONDS - build_start)) s"
build_start=$SECONDS
keep_going=(-k)
[ ${#generator[@]} -gt 0 ] && keep_going=(-k 0)
bench_targets=()
for source in "$root"/bench/bench_*.cpp; do bench_targets+=("$(basename "$source" .cpp)"); done
if cmake --build "$build" -j "$jobs" --target "${bench_targets[@]}" >"$logs/build_bench.log" 2>&1; then
  row build "bench/" ok "$((SECONDS - build_start)) s"
else
  row build "bench/" FAIL "see build_bench.log"
fi
# The transport tests hold the NCCL channel's [cuda] cases (run below with the others).
build_start=$SECONDS
if cmake --build "$build" -j "$jobs" --target test_transport >"$logs/build_transport.log" 2>&1; then
  row build test_transport ok "$((SECONDS - build_start)) s"
else
  row build test_transport FAIL "see build_transport.log"
fi
build_start=$SECONDS
if [ "${BUILD_ALL:-0}" = 1 ]; then
  if cmake --build "$build" -j "$jobs" -- "${keep_going[@]}" >"$logs/build_all.log" 2>&1; then
    row build "all targets" ok "$((SECONDS - build_start)) s"
  else
    row build "all targets" FAIL "$(grep -c FAILED "$logs/build_all.log") failed; see build_all.log"
  fi
fi

# -- tests -------------------------------------------------------------------------------------
# Catch2 test specs treat , [ ] as special: escape them to select one case by its exact name.
escape_name() { sed -e 's/\\/\\\\/g' -e 's/,/\\,/g' -e 's/\[/\\[/g' -e 's/\]/\\]/g'; }

for binary in "$build"/tests/*/test_*; do
  [ -x "$binary" ] && [ -f "$binary" ] || continue
  suite=$(basename "$binary")
  mapfile -t cases < <("$binary" "[cuda]" --list-test-names-only 2>/dev/null | sed '/^$/d')
  for name in "${cases[@]}"; do
    if over_budget; then
      row test "$suite: $name" SKIP "time budget spent"
      continue
    fi
    log="$logs/test_${suite}_$(echo "$name" | tr -c 'A-Za-z0-9' '_' | cut -c1-60).log"
    spec=$(printf '%s' "$name" | escape_name)
    t0=$SECONDS
    timeout "$(left "$test_timeout")" "$binary" "$spec" >"$log" 2>&1
    rc=$?
    if [ $rc -eq 124 ]; then
      row test "$suite: $name" FAIL "timeout ${test_timeout}s"
    elif [ $rc -ne 0 ]; then
      row test "$suite: $name" FAIL "$(grep -m1 -E 'FAILED|error|failed' "$log" | cut -c1-60)"
    elif grep -q "no CUDA device" "$log"; then
      row test "$suite: $name" SKIP "no CUDA device"
    else
      row test "$suite: $name" ok "$(grep -Eo '[0-9]+ assertions?' "$log" | head -1), $((SECONDS - t0)) s"
    fi
  done
done

# The whole tensors suite (CPU cases included) on the CUDA build.
if [ -x "$build/tests/tensors/test_tensors" ] && ! over_budget; then
  timeout "$(left 300)" "$build/tests/tensors/test_tensors" >"$logs/test_tensors_all.log" 2>&1
  rc=$?
  summary=$(grep -E "test cases|All tests passed" "$logs/test_tensors_all.log" | tail -1 | cut -c1-70)
  if [ $rc -eq 0 ]; then
    row test "test_tensors (whole suite)" ok "$summary"
  else
    row test "test_tensors (whole suite)" FAIL "rc $rc: $summary"
  fi
fi

# -- NCCL pipeline across two processes ---------------------------------------------------------
# Two ranks under tp-launch, stages on the GPU, tensors over the NCCL channel, compared with the
# embedded CPU run. With one GPU both ranks share it: NCCL refuses two ranks of a group on one
# device of one host, so each rank claims its own host id and NCCL talks over sockets.
if cmake --build "$build" -j "$jobs" --target mp_pipeline_check tp-launch \
    >"$logs/build_multiprocess.log" 2>&1; then
  # 1F1B goes over NCCL; ZBV stages device tensors through host memory over UCX.
  for kind in 1F1B ZBVZeroBubble; do
    over_budget && { row nccl "2 processes $kind" SKIP "time budget spent"; continue; }
    log="$logs/nccl_pipeline_$kind.log"
    timeout "$(left 300)" "$build/tools/tp-launch/tp-launch" --nproc-per-node 2 -- bash -c \
      'NCCL_HOSTID=tensorplay-rank-$RANK NCCL_NET=Socket exec "$0" "$@"' \
      "$build/tests/multiprocess/mp_pipeline_check" --schedule "$kind" --device cuda \
      --tolerance 1e-4 >"$log" 2>&1
    rc=$?
    if [ $rc -eq 0 ]; then
      row nccl "2 processes $kind" ok "$(grep -m1 -o 'largest relative difference [^,]*' "$log")"
    else
      row nccl "2 processes $kind" FAIL "rc $rc: $(grep -m1 -E 'failed|error' "$log" | cut -c1-60)"
    fi
  done
else
  row build "mp_pipeline_check" FAIL "see build_multiprocess.log"
fi

# -- benchmarks --------------------------------------------------------------------------------
for bench in "$build"/bench/bench_*; do
  [ -x "$bench" ] && [ -f "$bench" ] || continue
  name=$(basename "$bench")
  if over_budget; then
    row bench "$name" SKIP "time budget spent"
    continue
  fi
  timeout "$(left "$bench_timeout")" "$bench" >"$logs/$name.log" 2>&1
  rc=$?
  last=$(grep '"bench"' "$logs/$name.log" | tail -1 | sed 's/^{"bench": "[^"]*", //; s/}$//' | cut -c1-400)
  if [ $rc -eq 0 ]; then
    row bench "$name" ok "${last:-no summary line}"
  else
    row bench "$name" FAIL "rc $rc $( [ $rc -eq 124 ] && echo "(timeout ${bench_timeout}s)")"
  fi
done

[ $failures -eq 0 ]
