#!/usr/bin/env bash
# Runs a test binary under TENSORPLAY_CPU_ISA=<isa> when this CPU has that vector unit; otherwise
# exits 77, which CTest reports as skipped. Usage: run_if_cpu_isa.sh <isa> <test binary> <spec>
set -u
isa=$1
shift
flags=$(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null || true)
case "$isa" in
  scalar) need="" ;;
  sse4) need="sse4_1" ;;
  avx2) need="avx2" ;;
  avx512) need="avx512f" ;;
  *) echo "unknown target $isa"; exit 2 ;;
esac
if [ -n "$need" ] && ! grep -qw "$need" <<<"$flags"; then
  echo "this CPU has no $need: target $isa skipped"
  exit 77
fi
export TENSORPLAY_CPU_ISA=$isa
exec "$@"
