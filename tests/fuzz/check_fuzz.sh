#!/usr/bin/env bash
# Builds the notification decoder's libFuzzer target with clang (ASan and UBSan on) and runs it
# for a bounded time. Exits 77 (skipped) when clang or its libFuzzer runtime is missing.
# Usage: check_fuzz.sh SOURCE_DIR WORK_DIR [SECONDS]
set -euo pipefail
src=$1 work=$2 seconds=${3:-30}
clang=$(command -v clang++ || command -v clang++-14 || true)
[ -n "$clang" ] || { echo "check_fuzz: clang++ not found: skipped"; exit 77; }
mkdir -p "$work/corpus"
if ! "$clang" -std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
    -I "$src" "$src/tests/fuzz/fuzz_notification.cpp" "$src/actors/wire_note.cpp" \
    -o "$work/fuzz_notification" 2>"$work/build.log"; then
  if grep -q "libclang_rt.fuzzer\|cannot find.*fuzzer" "$work/build.log"; then
    echo "check_fuzz: clang's libFuzzer runtime is missing (libclang-rt-14-dev): skipped"
    exit 77
  fi
  cat "$work/build.log"
  exit 1
fi
# -rss_limit_mb: a decoder that allocates what a message claims fails here.
rc=0
"$work/fuzz_notification" -max_total_time="$seconds" -rss_limit_mb=2048 -print_final_stats=1 \
  -seed=1 "$work/corpus" >"$work/fuzz.log" 2>&1 || rc=$?
grep -E "^Done|stat::number_of_executed_runs|stat::peak_rss|ERROR|SUMMARY|==[0-9]+==" \
  "$work/fuzz.log" || true
[ "$rc" = 0 ] || tail -40 "$work/fuzz.log"
exit "$rc"
