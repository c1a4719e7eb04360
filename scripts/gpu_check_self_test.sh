# shellcheck shell=bash disable=SC2154  # sourced: $logs and the functions are gpu_check.sh's
# Sourced by gpu_check.sh --self-test: its log judge against canned logs, and the fallback's
# unpacking against a package made here (dpkg-deb). Uses gpu_check.sh's row, judge, judge_nccl,
# fallback_* and $logs; no binaries, no GPU.
t=$logs/self
mkdir -p "$t"
printf 'All tests passed (12 assertions in 3 test cases)\n' >"$t/pass"
printf 'warning:\n  no CUDA device: skipped\nAll tests passed (1 assertion in 1 test case)\n' >"$t/skip"
printf 'nccl channel: tensorplay was built without NCCL; rebuild\n' >"$t/stub"
printf 'x\n' >"$t/empty"
printf 'rank 0: ok\nNCCL INFO comm 0x1 rank 0 nranks 2 - Init COMPLETE\n' >"$t/one_comm"
check() {  # name expected-verdict-word actual
  if [ "${3%% *}" = "$2" ]; then row self "$1" ok "judged: ${3:0:60}"; else
    row self "$1" FAIL "judged: $3"
  fi
}
check "a passing log passes" ok "$(judge "$t/pass" 0)"
check "a skipped case fails" FAIL "$(judge "$t/skip" 0)"
check "a stub NCCL channel fails" FAIL "$(judge "$t/stub" 0)"
check "a timeout fails" FAIL "$(judge "$t/pass" 124)"
check "a non-zero exit fails" FAIL "$(judge "$t/empty" 1)"
check "too few NCCL communicators fail" FAIL "$(judge_nccl "$t/one_comm" 0 4)"
check "enough NCCL communicators pass" ok "$(judge_nccl "$t/one_comm" 0 1)"
# The fallback's prefix, from a package made here: dpkg -x, the alternatives links, CMake files
# pointed at the prefix, the pinned libraries checked.
if command -v dpkg-deb >/dev/null 2>&1; then
  fallback_dir=$t/fallback
  pkg=$t/pkg
  multi=usr/lib/x86_64-linux-gnu
  mkdir -p "$pkg/DEBIAN" "$pkg/$multi/cmake/fake" "$pkg/usr/include/x86_64-linux-gnu/openblas-pthread" \
    "$fallback_dir/debs"
  printf 'Package: fake\nVersion: 1\nArchitecture: all\nMaintainer: x <x@example.org>\nDescription: x\n' \
    >"$pkg/DEBIAN/control"
  echo 'set(prefix "/usr")' >"$pkg/$multi/cmake/fake/fake-targets.cmake"
  : >"$pkg/usr/include/x86_64-linux-gnu/openblas-pthread/cblas.h"
  mkdir -p "$pkg/lib/x86_64-linux-gnu"
  : >"$pkg/lib/x86_64-linux-gnu/libfake.so.1"
  ln -s /lib/x86_64-linux-gnu/libfake.so.1 "$pkg/$multi/libfake.so"
  dpkg-deb --build "$pkg" "$fallback_dir/debs/fake.deb" >/dev/null 2>&1
  echo "/usr/include/x86_64-linux-gnu/cblas.h /usr/include/x86_64-linux-gnu/openblas-pthread/cblas.h" \
    >"$fallback_dir/links"
  echo "-DFAKE_LIBRARY=@PREFIX@/$multi/libfake.so" >"$fallback_dir/cache_args"
  p=$t/prefix
  yes_no() { "$@" >/dev/null 2>&1 && echo ok || echo FAIL; }
  fallback_unpack "$p" >/dev/null
  check "fallback: dpkg -x into the prefix" ok "$(yes_no test -f "$p/$multi/libfake.so.1")"
  check "fallback: absolute link into the prefix" ok \
    "$(yes_no test "$(readlink -f "$p/$multi/libfake.so")" = "$(readlink -f "$p/$multi/libfake.so.1")")"
  check "fallback: alternatives link made" ok "$(yes_no test -e "$p/usr/include/x86_64-linux-gnu/cblas.h")"
  check "fallback: CMake files use the prefix" ok \
    "$(yes_no grep -qF "\"$p/usr\"" "$p/$multi/cmake/fake/fake-targets.cmake")"
  check "fallback: pinned library present" ok "$(yes_no fallback_check_prefix "$p")"
  check "fallback: settings pin into the prefix" ok \
    "$(yes_no grep -qxF -- "-DFAKE_LIBRARY=$p/$multi/libfake.so" <(fallback_cmake_args "$p"))"
  rm "$p/$multi/libfake.so.1"
  check "fallback: a pinned library missing fails" FAIL "$(yes_no fallback_check_prefix "$p")"
else
  row self "fallback unpacking" "n/a" "dpkg-deb absent"
fi
