#!/usr/bin/env bash
# Builds a libFuzzer target with clang (ASan and UBSan on) and runs it for a bounded time: by
# default the protocol decoder's (tensorplay/wire/protocol.h). Exits 77 (skipped) when clang or
# its libFuzzer runtime is missing.
# Usage: check_fuzz.sh SOURCE_DIR WORK_DIR [SECONDS [TARGET SOURCE...]]
#   TARGET names the fuzzer binary, built from the SOURCEs (relative to SOURCE_DIR).
set -euo pipefail
src=$1 work=$2 seconds=${3:-30}
target=fuzz_protocol
sources=(tests/fuzz/fuzz_protocol.cpp tensorplay/wire/protocol.cpp)
if [ $# -ge 5 ]; then
  target=$4
  sources=("${@:5}")
fi
clang=$(command -v clang++ || command -v clang++-14 || true)
[ -n "$clang" ] || { echo "check_fuzz: clang++ not found: skipped"; exit 77; }
mkdir -p "$work/corpus"
if ! "$clang" -std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
    -I "$src" "${sources[@]/#/$src/}" -o "$work/$target" 2>"$work/build.log"; then
  if grep -q "libclang_rt.fuzzer\|cannot find.*fuzzer" "$work/build.log"; then
    echo "check_fuzz: clang's libFuzzer runtime is missing (libclang-rt-14-dev): skipped"
    exit 77
  fi
  cat "$work/build.log"
  exit 1
fi
# -rss_limit_mb: a reader that allocates what its input claims fails here.
rc=0
# -error_exitcode=1: libFuzzer's default (77) is CTest's skip code here, so a crash read as a skip;
# -artifact_prefix: crash inputs go beside the fuzzer, not into the current folder.
"$work/$target" -max_total_time="$seconds" -rss_limit_mb=2048 -print_final_stats=1 \
  -error_exitcode=1 -artifact_prefix="$work/" -seed=1 "$work/corpus" >"$work/fuzz.log" 2>&1 || rc=$?
grep -E "^Done|stat::number_of_executed_runs|stat::peak_rss|ERROR|SUMMARY|==[0-9]+==" \
  "$work/fuzz.log" || true
[ "$rc" = 0 ] || tail -40 "$work/fuzz.log"
exit "$rc"
