#!/usr/bin/env bash
# Builds the GPU bundle (scripts/gpu_bundle.sh: a CUDA build, minutes), checks its size, unpacks it
# into an empty folder where every library must resolve from the bundle under a cleared
# LD_LIBRARY_PATH (except the CUDA and C runtime ones), runs its check's dry run from there (which
# unpacks the fallback's Debian packages into a prefix and checks it), and
# runs the check for real against a stand-in nvidia-smi: without a GPU every GPU step must FAIL
# (its tests skip), never pass.
# Usage: check_gpu_bundle.sh <repository> <work folder>   (GPU_BUNDLE_BUILD_DIR: reuse a build)
set -u
root=$1
work=$2
mkdir -p "$work"
fail() {
  echo "check_gpu_bundle: $*"
  exit 1
}
bundle=$work/tensorplay-gpu.tar.gz
BUILD_DIR=${GPU_BUNDLE_BUILD_DIR:-$work/build} bash "$root/scripts/gpu_bundle.sh" "$bundle" || fail "gpu_bundle.sh failed"
bash "$root/scripts/gpu_bundle.sh" --verify "$bundle" || fail "libraries do not resolve"
size=$(stat -c %s "$bundle")
[ "$size" -le $((60 * 1048576)) ] || fail "the bundle is $size bytes, over 60 MiB"

unpacked=$work/unpacked
rm -rf "$unpacked"
mkdir -p "$unpacked"
tar -xzf "$bundle" -C "$unpacked"
OUT=$work/out env -u LD_LIBRARY_PATH bash "$unpacked/tensorplay-gpu/gpu_check.sh" --dry-run \
  >"$work/dry.log" 2>&1
rc=$?
cat "$work/dry.log"
[ $rc -eq 0 ] || fail "the bundle's dry run exited $rc"
for b in test_tensors test_transport mp_pipeline_check tp-launch bench_cuda_kernels; do
  grep -qE "pre +ldd $b +(ok|no device)" "$work/dry.log" || fail "ldd of $b not reported"
done
# The fallback: its Debian packages unpack with dpkg -x into a prefix holding every library the
# build pinned; its size is stated.
grep -qE "^fb +unpack +ok +[0-9]+ packages, [0-9]+ MiB; [0-9]+ pinned files present" "$work/dry.log" ||
  fail "the dry run did not unpack the fallback's packages into a complete prefix"
grep -qE "^fallback_mib=[0-9]+$" "$unpacked/tensorplay-gpu/MANIFEST" || fail "MANIFEST lacks fallback_mib"

# A real run where nvidia-smi claims a GPU that CUDA does not see.
if ! command -v nvidia-smi >/dev/null 2>&1; then
  mkdir -p "$work/fake"
  cat >"$work/fake/nvidia-smi" <<'EOS'
#!/bin/bash
case "$*" in
  -L) echo "GPU 0: stand-in (UUID: GPU-none)" ;;
  *--query-gpu*) echo "stand-in, 1 MiB, 0.0, Default, Disabled" ;;
  *) echo "CUDA Version: 99.0" ;;
esac
EOS
  chmod +x "$work/fake/nvidia-smi"
  # The toolkit's stub driver library: loads, and reports no device.
  mkdir -p "$work/fake/lib"
  stub=$(ls /usr/local/cuda/lib64/stubs/libcuda.so /usr/local/cuda/targets/*/lib/stubs/libcuda.so \
    2>/dev/null | head -1)
  [ -n "$stub" ] && ln -sf "$stub" "$work/fake/lib/libcuda.so.1"
  PATH=$work/fake:$PATH OUT=$work/out_fake BUDGET_SECONDS=120 LD_LIBRARY_PATH=$work/fake/lib \
    bash "$unpacked/tensorplay-gpu/gpu_check.sh" >"$work/fake.log" 2>&1
  rc=$?
  cat "$work/fake.log"
  [ $rc -ne 0 ] || fail "a run without a usable GPU passed"
  for step in "cuda ops vs cpu" "nccl transport" "nccl 1F1B 2 processes" \
    "nccl pp2 x dp2 4 processes" "bench_cuda_kernels"; do
    grep -qE "^gpu +$step +FAIL" "$work/fake.log" || fail "step '$step' did not fail without a GPU"
  done
fi
echo "check_gpu_bundle: ok ($((size / 1048576)) MiB)"
