#!/usr/bin/env bash
# Runs a test binary's GPU cases when an NVIDIA GPU is present; otherwise exits 77, which CTest
# reports as skipped. Usage: run_if_gpu.sh <test binary> <catch test spec>
set -u
if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L 2>/dev/null | grep -q "^GPU "; then
  echo "no CUDA device: GPU tests skipped"
  exit 77
fi
binary=$1
shift
# A binary without GPU cases (or built without CUDA) has nothing to run: that is a skip too.
if [ "$("$binary" --list-test-names-only "$@" 2>/dev/null | grep -c .)" -eq 0 ]; then
  echo "no GPU test cases in $binary"
  exit 77
fi
exec "$binary" "$@"
