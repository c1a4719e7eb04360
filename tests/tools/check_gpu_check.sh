#!/usr/bin/env bash
# The GPU check's plumbing where there is no GPU: its log judge against canned logs (--self-test),
# and a dry run (preflight and table, every GPU step "no device", the log archive written).
# Usage: check_gpu_check.sh <gpu_check.sh> <work folder>
set -u
script=$1
work=$2
rm -rf "$work"
mkdir -p "$work"
fail() {
  echo "check_gpu_check: $*"
  exit 1
}

bash "$script" --self-test >"$work/self.log" 2>&1 || { cat "$work/self.log"; fail "--self-test failed"; }
grep -q "a skipped case fails  *ok" "$work/self.log" || fail "the self test did not judge a skip"
# The fallback's prefix (dpkg -x of a package the self test makes).
for c in "fallback: dpkg -x into the prefix" "fallback: absolute link into the p" \
  "fallback: alternatives link made" "fallback: a pinned library missing"; do
  grep -qE "^self +$c[a-z ]* +ok" "$work/self.log" || fail "the self test did not check '$c'"
done

OUT=$work/out bash "$script" --dry-run >"$work/dry.log" 2>&1
rc=$?
cat "$work/dry.log"
[ $rc -eq 0 ] || fail "--dry-run exited $rc"
for step in "cuda ops vs cpu" "nccl transport" "nccl 1F1B 2 processes" "nccl pp2 x dp2 4 processes" \
  "bench_cuda_kernels"; do
  # Once as the row printed when the step ended, once in the table.
  n=$(grep -cE "gpu +$step +no device" "$work/dry.log")
  [ "$n" -eq 2 ] || fail "step '$step' is not reported 'no device' twice (got $n)"
done
grep -qE "pre +(gpu|compute mode)" "$work/dry.log" || fail "no preflight rows"
grep -q "^KIND " "$work/dry.log" || fail "no table"
[ -s "$work/out/gpu_check_logs.tar.gz" ] || fail "no log archive under OUT"
tar -tzf "$work/out/gpu_check_logs.tar.gz" | grep -q gpu_check.log || fail "the archive lacks gpu_check.log"
if bash "$script" --no-such-flag >/dev/null 2>&1; then fail "an unknown flag was accepted"; fi
echo "check_gpu_check: ok"
