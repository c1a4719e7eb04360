#!/usr/bin/env bash
# GPU check, run from the bundle scripts/gpu_bundle.sh makes: no build, no packages, a few minutes
# on a bare GPU machine. A preflight (GPU, compute mode, MIG, driver, glibc, the CUDA libraries it
# finds, ldd of every binary), then the CUDA op table against the CPU, the NCCL transport cases, a
# two-process 1F1B and a pp 2 x dp 2 four-process run over NCCL (ranks sharing one GPU, each its
# own NCCL_HOSTID), and bench_cuda_kernels. A row is printed as each part ends, the whole table
# last; every log goes into one archive under $OUT. A skipped case, a stub NCCL channel, or a
# pipeline that did not create its NCCL communicators is a FAILURE. Exit status 0 when all passed.
#
#   tar xzf tensorplay-gpu.tar.gz && tensorplay-gpu/gpu_check.sh
#   gpu_check.sh --dry-run     # preflight and table only; every GPU step reports "no device"
#   gpu_check.sh --self-test   # the log judge against canned logs (no binaries needed)
#   gpu_check.sh --fallback    # build from the carried packages even where the binaries resolve
#
# Fallback: where the bundled binaries do not load here (a library of this system the bundle did
# not carry), the script builds them from the bundle's fallback/ folder: the source and the Debian
# packages of the build's dependencies, unpacked with dpkg -x into a prefix (the MANIFEST's
# fallback_mib is what travels). It needs nvcc, CMake and a C++ compiler here, and this glibc at
# least as new as the packages' (an older glibc is reported, not worked around). A dry run unpacks
# the packages and checks the prefix, without building.
#
# CUDA runtime is linked into the binaries; cuBLAS and NCCL come from this machine: its CUDA
# installation, or the nvidia-* pip wheels next to PyTorch (python's site-packages/nvidia/*/lib).
# The self test lives in gpu_check_self_test.sh beside this script.
# Settings: OUT (log archive folder, default ./gpu-check-out), BUDGET_SECONDS (default 270),
# CUDA_LIB_DIRS (extra folders to search first, colon separated), FALLBACK_DIR (default
# <bundle>/fallback), FALLBACK_WORK (where the fallback builds; default <bundle>/fallback-build).
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
mode=run
force_fallback=0
case "${1:-}" in
  --dry-run) mode=dry ;;
  --self-test) mode=self ;;
  --fallback) force_fallback=1 ;;
  "") ;;
  *)
    echo "usage: $0 [--dry-run | --self-test | --fallback]" >&2
    exit 2
    ;;
esac

bin=$here/bin
lib=$here/lib
out=${OUT:-$PWD/gpu-check-out}
budget=${BUDGET_SECONDS:-270}
logs=$(mktemp -d "${TMPDIR:-/tmp}/gpu-check.XXXXXX")
start=$SECONDS
rows=()
failures=0

# -- table -------------------------------------------------------------------------------------
row() {  # kind name result detail; printed at once, kept for the table
  local detail=${4//|//}
  rows+=("$1|$2|$3|$detail")
  [ "$3" = FAIL ] && failures=$((failures + 1))
  printf 'gpu_check: %-5s %-34.34s %-9s %s\n' "$1" "$2" "$3" "$detail" | tee -a "$logs/gpu_check.log"
  return 0
}
note() { echo "gpu_check: $*" | tee -a "$logs/gpu_check.log"; }

finish() {
  echo
  echo "==================== gpu_check ($mode, $((SECONDS - start)) s) ===================="
  printf '%-5s %-34s %-9s %s\n' KIND NAME RESULT DETAIL
  local r kind name result detail
  for r in "${rows[@]}"; do
    IFS='|' read -r kind name result detail <<<"$r"
    printf '%-5s %-34.34s %-9s %s\n' "$kind" "$name" "$result" "$detail"
  done
  if [ "$mode" = self ]; then
    echo "failures: $failures"
    rm -rf "$logs"
  elif mkdir -p "$out" 2>/dev/null && tar -czf "$out/gpu_check_logs.tar.gz" -C "$logs" . 2>/dev/null; then
    echo "failures: $failures   logs: $out/gpu_check_logs.tar.gz"
    rm -rf "$logs"
  else
    echo "failures: $failures   logs: $logs (could not write $out)"
  fi
}
trap finish EXIT

# -- judging a log -----------------------------------------------------------------------------
# Prints "ok <summary>" or "FAIL <reason>" for a step's log and exit status. Anything skipped, a
# stub NCCL channel, a missing device or an empty selection fails the step.
judge() {
  local log=$1 rc=$2 line
  if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
    echo "FAIL timed out"
    return
  fi
  # NCCL's own INFO lines are not ours to judge.
  line=$(grep -v "NCCL INFO" "$log" | grep -m1 -iE "built without NCCL|nccl channel is a stub")
  [ -n "$line" ] && { echo "FAIL stub NCCL: ${line:0:70}"; return; }
  line=$(grep -v "NCCL INFO" "$log" | grep -m1 -iE "skipp")
  [ -n "$line" ] && { echo "FAIL skipped: ${line:0:70}"; return; }
  line=$(grep -v "NCCL INFO" "$log" |
    grep -m1 -iE "no CUDA device|No test cases matched|cannot open shared object")
  [ -n "$line" ] && { echo "FAIL ${line:0:80}"; return; }
  if [ "$rc" -ne 0 ]; then
    line=$(grep -m1 -E "FAILED|[Ee]rror|failed" "$log")
    echo "FAIL rc $rc: ${line:0:70}"
    return
  fi
  line=$(grep -Eo "All tests passed \([0-9]+ assertions? in [0-9]+ test cases?\)" "$log" | tail -1)
  echo "ok ${line:-exit 0}"
}

# NCCL logs "Init COMPLETE" once per communicator (NCCL_DEBUG=INFO): a pipeline that fell back to
# UCX creates none. $3 is the fewest the run must show.
judge_nccl() {
  local log=$1 rc=$2 want=$3 verdict inits
  verdict=$(judge "$log" "$rc")
  [ "${verdict%% *}" = ok ] || { echo "$verdict"; return; }
  inits=$(grep -c "Init COMPLETE" "$log")
  if [ "$inits" -lt "$want" ]; then
    echo "FAIL $inits NCCL communicators, expected at least $want: the channel is not NCCL"
    return
  fi
  echo "ok $inits NCCL communicators; $(grep -m1 -o 'largest relative difference [^,]*' "$log")"
}

# -- fallback: build from the carried source and Debian packages ------------------------------
fallback_dir=${FALLBACK_DIR:-$here/fallback}
nccl_dir=""  # where the preflight found libnccl
# Unpacks every carried .deb into $1 with dpkg -x (no maintainer scripts run), then does what
# installing would have: CMake package files that name /usr outright (UCX's) are pointed at the
# prefix, and the alternatives links (cblas.h, libopenblas.so) are made. Prints its size in MiB.
fallback_unpack() {
  local prefix=$1 deb l t
  mkdir -p "$prefix"
  for deb in "$fallback_dir"/debs/*.deb; do
    [ -e "$deb" ] || continue
    dpkg -x "$deb" "$prefix" || { echo "dpkg -x $(basename "$deb") failed"; return 1; }
  done
  # Merged /usr as on Debian 12 (zlib ships in /lib); absolute links pointed into the prefix.
  if [ -d "$prefix/lib" ] && [ ! -L "$prefix/lib" ]; then
    mkdir -p "$prefix/usr/lib" && cp -a "$prefix/lib/." "$prefix/usr/lib/" && rm -rf "${prefix:?}/lib" &&
      ln -s usr/lib "$prefix/lib"
  fi
  find "$prefix/usr" -type l -lname '/*' | while read -r l; do
    ln -sfn "$prefix$(readlink "$l")" "$l"
  done
  grep -rlF '"/usr"' "$prefix/usr/lib/x86_64-linux-gnu/cmake" "$prefix/usr/lib/cmake" \
    "$prefix/usr/share/cmake" 2>/dev/null | xargs -r sed -i "s|\"/usr\"|\"$prefix/usr\"|g"
  if [ -f "$fallback_dir/links" ]; then
    while read -r l t; do
      [ -e "$prefix$t" ] && mkdir -p "$(dirname "$prefix$l")" && ln -sfn "$prefix$t" "$prefix$l"
    done <"$fallback_dir/links"
  fi
  du -sm "$prefix" | cut -f1
}
# The CMake settings of a build against prefix $1, one a line: the bundle's configuration, the
# prefix's folders, each library the original build found pinned to its file in the prefix, and
# NCCL from where the preflight found it.
fallback_cmake_args() {
  local prefix=$1 multi=$1/usr/lib/x86_64-linux-gnu
  printf '%s\n' -DCMAKE_BUILD_TYPE=Release -DTENSORPLAY_CUDA=ON -DTENSORPLAY_REQUIRE_NCCL=ON \
    -DTENSORPLAY_CUDA_STATIC_RUNTIME=ON -DTENSORPLAY_BUILD_EXAMPLES=OFF \
    "-DCMAKE_CUDA_ARCHITECTURES=$(sed -n 's/^cuda_arch=//p' "$here/MANIFEST" 2>/dev/null | grep . || echo 90)" \
    "-DCMAKE_PREFIX_PATH=$prefix/usr" "-DCMAKE_LIBRARY_PATH=$multi" \
    "-DCMAKE_INCLUDE_PATH=$prefix/usr/include;$prefix/usr/include/x86_64-linux-gnu" \
    "-DCMAKE_BUILD_RPATH=$multi;$multi/openblas-pthread"
  [ -f "$fallback_dir/cache_args" ] && sed "s|@PREFIX@|$prefix|" "$fallback_dir/cache_args"
  if [ -n "$nccl_dir" ]; then
    echo "-DNCCL_LIBRARY=$(ls "$nccl_dir"/libnccl.so* | head -1)"
    echo "-DNCCL_INCLUDE_DIR=$(cd "$nccl_dir/../include" 2>/dev/null && pwd)"
  fi
}
# Every file the settings pin (-DX=/path) exists: prints the count, or what is missing.
fallback_check_prefix() {
  local prefix=$1 arg path n=0 bad=""
  while read -r arg; do
    path=${arg#*=}
    [[ "$arg" =~ ^-D[A-Za-z0-9_]+_(LIBRARY[A-Z_]*|DIR)= ]] && [[ "$arg" != -DCMAKE_* ]] &&
      [[ "$path" = "$prefix"* ]] || continue
    n=$((n + 1))
    [ -e "$path" ] || bad="$bad ${path#"$prefix"}"
  done < <(fallback_cmake_args "$prefix")
  [ -z "$bad" ] && { echo "$n"; return 0; }
  echo "missing from the prefix:$bad"
  return 1
}
# Unpacks, then builds the binaries in $1/build from the carried source; points bin, the library
# path and UCX's modules at the result. A dry run stops after checking the prefix.
fallback_build() {
  local work=$1 prefix=$1/prefix t0=$SECONDS mib pinned args b path
  rm -rf "$work" && mkdir -p "$work/src" "$work/bin" || { row fb unpack FAIL "cannot write $work"; return 1; }
  mib=$(fallback_unpack "$prefix") || { row fb unpack FAIL "$mib"; return 1; }
  pinned=$(fallback_check_prefix "$prefix") || { row fb prefix FAIL "$pinned"; return 1; }
  row fb unpack ok "$(ls "$fallback_dir"/debs/*.deb 2>/dev/null | wc -l) packages, $mib MiB; $pinned pinned files present"
  if [ "$mode" = dry ]; then
    row fb build "no device" "dry run: not built"
    rm -rf "$work"
    return 0
  fi
  tar -xzf "$fallback_dir/src.tar.gz" -C "$work/src" || { row fb build FAIL "src.tar.gz unreadable"; return 1; }
  mapfile -t args < <(fallback_cmake_args "$prefix")
  command -v ninja >/dev/null 2>&1 && args+=(-G Ninja)
  if ! cmake -S "$work/src" -B "$work/build" "${args[@]}" >"$logs/fallback_configure.log" 2>&1 ||
    ! cmake --build "$work/build" -j "$(nproc)" --target "${binaries[@]}" >"$logs/fallback_build.log" 2>&1; then
    row fb build FAIL "$(grep -m1 -iE 'error' "$logs"/fallback_*.log | cut -c1-90)"
    return 1
  fi
  for b in "${binaries[@]}"; do
    path=$(find "$work/build" -type f -name "$b" -perm -u+x -not -path '*/CMakeFiles/*' | head -1)
    [ -n "$path" ] && ln -sf "$path" "$work/bin/$b"
  done
  bin=$work/bin
  export LD_LIBRARY_PATH=$prefix/usr/lib/x86_64-linux-gnu:$prefix/usr/lib/x86_64-linux-gnu/openblas-pthread:$LD_LIBRARY_PATH
  export UCX_MODULE_DIR=$prefix/usr/lib/x86_64-linux-gnu/ucx
  row fb build ok "$((SECONDS - t0)) s, -j $(nproc)"
}

if [ "$mode" = self ]; then
  # shellcheck source=gpu_check_self_test.sh
  source "$here/gpu_check_self_test.sh"
  exit $((failures > 0))
fi

# -- preflight ---------------------------------------------------------------------------------
steps=("cuda ops vs cpu" "nccl transport" "two-GPU cases" "nccl 1F1B 2 processes"
  "nccl pp2 x dp2 4 processes" "bench_cuda_kernels")
stop=""  # why the GPU steps cannot run, once known

[ -f "$here/MANIFEST" ] && note "bundle: $(tr '\n' ' ' <"$here/MANIFEST")"
gpus=0
compat=""
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >"$logs/nvidia-smi-L.txt" 2>&1; then
  nvidia-smi >"$logs/nvidia-smi.txt" 2>&1
  nvidia-smi -q >"$logs/nvidia-smi-q.txt" 2>&1
  gpus=$(grep -c "^GPU " "$logs/nvidia-smi-L.txt")
  info=$(nvidia-smi --query-gpu=name,memory.total,driver_version,compute_mode,mig.mode.current \
    --format=csv,noheader 2>/dev/null | head -1)
  row pre gpu ok "$gpus: $info"
  driver_cuda=$(grep -o "CUDA Version: [0-9.]*" "$logs/nvidia-smi.txt" | grep -o "[0-9.]*$")
  mode_now=$(echo "$info" | cut -d, -f4 | tr -d ' ')
  if [ "$mode_now" != Default ] && [ -n "$mode_now" ]; then
    row pre "compute mode" FAIL "$mode_now: the multi-process runs need Default"
  else
    row pre "compute mode" ok "${mode_now:-unknown}"
  fi
  mig=$(echo "$info" | cut -d, -f5 | tr -d ' ')
  if [ "$mig" = Enabled ]; then
    row pre "MIG" FAIL "enabled: ranks would share a MIG slice; run on a whole GPU"
  else
    row pre "MIG" ok "${mig:-unknown}"
  fi
  need_cuda=$(sed -n 's/^cuda_runtime=//p' "$here/MANIFEST" 2>/dev/null)
  if [ -n "$need_cuda" ] && [ -n "$driver_cuda" ] &&
    [ "$(printf '%s\n%s\n' "$need_cuda" "$driver_cuda" | sort -V | head -1)" != "$need_cuda" ]; then
    # A data-centre GPU can run a newer runtime on an older driver with the toolkit's
    # forward-compatibility driver library, where the image carries it.
    compat=$(ls -d /usr/local/cuda*/compat 2>/dev/null | while read -r d; do
      [ -e "$d/libcuda.so.1" ] && echo "$d"; done | head -1)
    if [ -n "$compat" ]; then
      row pre "driver" ok "supports CUDA $driver_cuda < $need_cuda: forward compatibility from $compat"
    else
      row pre "driver" FAIL "supports CUDA $driver_cuda, the bundle needs $need_cuda (no compat library)"
      stop="driver too old"
    fi
  else
    row pre "driver" ok "CUDA ${driver_cuda:-?} (bundle built with ${need_cuda:-?})"
  fi
elif [ "$mode" = dry ]; then
  row pre gpu "no device" "nvidia-smi absent or no GPU"
else
  row pre gpu FAIL "nvidia-smi absent or lists no GPU"
  stop="no GPU"
fi

at_least() { [ "$(printf '%s\n%s\n' "$2" "$1" | sort -V | head -1)" = "$2" ]; }  # $1 >= $2
glibc=$(ldd --version 2>/dev/null | head -1 | grep -o "[0-9]*\.[0-9]*$")
need_glibc=$(sed -n 's/^glibc=//p' "$here/MANIFEST" 2>/dev/null)
need_cxx=$(sed -n 's/^glibc_cxx=//p' "$here/MANIFEST" 2>/dev/null)
if [ -n "$need_glibc" ] && [ -n "$glibc" ] && ! at_least "$glibc" "$need_glibc"; then
  row pre glibc FAIL "$glibc here, the binaries need $need_glibc"
  stop="glibc too old"
else
  row pre glibc ok "${glibc:-?} (needs ${need_glibc:-?})"
fi
# The bundled C++ runtime where this glibc can load it, else the machine's own.
cxx_path=""
if [ -d "$lib/cxx" ]; then
  if [ -z "$need_cxx" ] || [ -z "$glibc" ] || at_least "$glibc" "$need_cxx"; then
    cxx_path=$lib/cxx
    row pre "C++ runtime" ok "bundled"
  else
    row pre "C++ runtime" ok "this machine's (the bundled one needs glibc $need_cxx)"
  fi
fi

# cuBLAS and NCCL: the sonames the binaries were linked against (MANIFEST), looked up in this
# machine's CUDA installation and pip wheels.
search=()
IFS=: read -ra extra <<<"${CUDA_LIB_DIRS:-}"
search+=("${extra[@]}")
for d in "${CUDA_HOME:-/usr/local/cuda}/lib64" /usr/local/cuda/lib64 \
  /usr/local/cuda/targets/x86_64-linux/lib /usr/lib/x86_64-linux-gnu; do
  search+=("$d")
done
if command -v python3 >/dev/null 2>&1; then
  while read -r sp; do
    for d in "$sp"/nvidia/*/lib; do [ -d "$d" ] && search+=("$d"); done
  done < <(python3 -c 'import site; print("\n".join(site.getsitepackages() + [site.getusersitepackages()]))' 2>/dev/null)
fi
cuda_libs=$(sed -n 's/^cuda_libs=//p' "$here/MANIFEST" 2>/dev/null)
[ -n "$cuda_libs" ] || cuda_libs="libcublas.so.13 libcublasLt.so.13 libnccl.so.2"
lib_path=$lib${cxx_path:+:$cxx_path}${compat:+:$compat}
for soname in $cuda_libs; do
  found=""
  for d in "${search[@]}"; do
    [ -n "$d" ] && [ -e "$d/$soname" ] && { found=$d; break; }
  done
  if [ -z "$found" ]; then
    found=$(ldconfig -p 2>/dev/null | grep -m1 " $soname " | sed 's/.*=> //' | xargs -r dirname)
  fi
  if [ -n "$found" ]; then
    row pre "$soname" ok "$found"
    [ "${soname%%.so*}" = libnccl ] && nccl_dir=$found
    case ":$lib_path:" in *":$found:"*) ;; *) lib_path=$lib_path:$found ;; esac
    if [ "${soname%%.so*}" = libnccl ]; then
      v=$(grep -ao -m1 'NCCL version [0-9][0-9.a-z+-]*' "$found/$soname" | head -1)
      row pre "NCCL version" ok "${v:-unknown}"
    fi
  elif [ "$mode" = dry ]; then
    row pre "$soname" "no device" "not found (searched ${#search[@]} folders)"
  else
    # Another major version there means another CUDA: say so, it decides what to rebuild with.
    other=""
    for d in "${search[@]}"; do
      [ -n "$d" ] || continue
      other=$(ls "$d/${soname%%.so*}".so.[0-9]* 2>/dev/null | head -1)
      [ -n "$other" ] && break
    done
    row pre "$soname" FAIL "not found in the CUDA installation or python's nvidia/*/lib${other:+; \
found $other: this machine has another CUDA, rebuild the bundle with that toolkit}"
    stop="$soname missing"
  fi
done
# The driver library: loaded by the CUDA runtime at run time, so ldd of the binaries does not show
# it. Container images often reach it through their own LD_LIBRARY_PATH, kept last.
lib_path=$lib_path${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
driver_lib=""
IFS=: read -ra path_dirs <<<"$lib_path"
for d in "${path_dirs[@]}"; do [ -n "$d" ] && [ -e "$d/libcuda.so.1" ] && { driver_lib=$d/libcuda.so.1; break; }; done
[ -n "$driver_lib" ] || driver_lib=$(ldconfig -p 2>/dev/null | grep -m1 "libcuda.so.1 " | sed 's/.*=> //')
if [ -n "$driver_lib" ]; then
  row pre "libcuda.so.1" ok "$driver_lib"
elif [ "$mode" = dry ]; then
  row pre "libcuda.so.1" "no device" "no driver library here"
else
  row pre "libcuda.so.1" FAIL "the driver library is not on the library path or in ldconfig's cache"
  stop="no driver library"
fi
export LD_LIBRARY_PATH=$lib_path
export UCX_MODULE_DIR=$lib/ucx
note "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"

binaries=(test_tensors test_transport test_actors mp_pipeline_check tp-launch bench_cuda_kernels)
# ldd of each binary in $bin, rows of kind $1. A library missing is "fallback" (not a failure)
# where the fallback will be tried next, else a FAIL.
check_binaries() {
  local kind=$1 b missing unresolved=FAIL
  [ "$kind" = pre ] && [ -f "$fallback_dir/src.tar.gz" ] && unresolved=fallback
  for b in "${binaries[@]}"; do
    if [ ! -x "$bin/$b" ]; then
      if [ "$mode" = dry ]; then row "$kind" "ldd $b" "no bundle" "$bin/$b absent"; else
        row "$kind" "ldd $b" FAIL "$bin/$b absent: unpack the whole bundle"
        stop="binaries missing"
      fi
      continue
    fi
    ldd "$bin/$b" >"$logs/ldd_$b.txt" 2>&1
    missing=$(grep "not found" "$logs/ldd_$b.txt" | awk '{print $1}' | tr '\n' ' ')
    if [ -n "$missing" ]; then
      if [ "$mode" = dry ]; then row "$kind" "ldd $b" "no device" "unresolved here: $missing"; else
        row "$kind" "ldd $b" "$unresolved" "unresolved: $missing"
        stop="libraries missing"
      fi
    else
      row "$kind" "ldd $b" ok "$(grep -c '=>' "$logs/ldd_$b.txt") libraries resolve"
    fi
  done
}
check_binaries pre
if [ -f "$fallback_dir/src.tar.gz" ] &&
  { [ "$mode" = dry ] || [ "$stop" = "libraries missing" ] || [ "$force_fallback" = 1 ]; }; then
  [ "$stop" = "libraries missing" ] && stop=""
  if fallback_build "${FALLBACK_WORK:-$here/fallback-build}"; then
    [ "$mode" = dry ] || check_binaries fb
    start=$SECONDS  # the GPU steps' budget starts after the build
  else
    stop=${stop:-the fallback build failed}
  fi
elif [ "$stop" = "libraries missing" ]; then
  note "no fallback/ in this bundle (made with FALLBACK=0?): nothing to build from"
fi

# -- GPU steps ---------------------------------------------------------------------------------
left() {  # a timeout of at most $1 seconds that ends by the budget
  local l=$((budget - (SECONDS - start)))
  [ "$l" -lt 1 ] && l=1
  [ "$l" -lt "$1" ] && echo "$l" || echo "$1"
}
not_run() {  # every step, with one result and detail
  local s
  for s in "${steps[@]}"; do row gpu "$s" "$1" "$2"; done
}
if [ "$mode" = dry ]; then
  not_run "no device" "dry run"
  exit $((failures > 0))
fi
if [ -n "$stop" ]; then
  not_run FAIL "not run: $stop"
  exit 1
fi

# NCCL between processes on one host: sockets on loopback; each rank its own host id so that two
# ranks of one communicator may share the GPU.
export NCCL_SOCKET_IFNAME=lo NCCL_NET=Socket NCCL_DEBUG=INFO
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}

step() {  # name timeout log -- command...; runs, judges with judge, prints the row
  local name=$1 timeout=$2 log=$logs/$3
  shift 4
  if [ $((SECONDS - start)) -ge "$budget" ]; then
    row gpu "$name" FAIL "not run: the time budget ($budget s) was spent"
    return
  fi
  local t0=$SECONDS
  timeout -k 5 "$(left "$timeout")" "$@" >"$log" 2>&1
  local rc=$?
  local verdict
  verdict=$(judge "$log" "$rc")
  row gpu "$name" "${verdict%% *}" "${verdict#* }; $((SECONDS - t0)) s"
}

step "cuda ops vs cpu" 150 cuda_ops.log -- "$bin/test_tensors" "[cuda]~[multi_gpu]"
step "nccl transport" 150 nccl_transport.log -- "$bin/test_transport" "[cuda]~[multi_gpu]"
step "sharding collectives" 90 shard_collectives.log -- "$bin/test_actors" "[cuda]"
if [ "$gpus" -ge 2 ]; then
  step "two-GPU cases" 90 two_gpus.log -- bash -c \
    '"$1" "[multi_gpu]" && "$2" "[multi_gpu]"' _ "$bin/test_tensors" "$bin/test_transport"
else
  row gpu "two-GPU cases" "n/a" "one GPU: the [multi_gpu] cases need two"
fi

launch=("$bin/tp-launch" --grace-seconds 2)
per_rank='NCCL_HOSTID=tensorplay-rank-$RANK exec "$0" "$@"'
for run in "nccl 1F1B 2 processes|2|4|nccl_1f1b.log|" \
  "nccl pp2 x dp2 4 processes|4|12|nccl_pp2_dp2.log|--dp 2 --microbatches 4"; do
  IFS='|' read -r name procs want log extra <<<"$run"
  if [ $((SECONDS - start)) -ge "$budget" ]; then
    row gpu "$name" FAIL "not run: the time budget ($budget s) was spent"
    continue
  fi
  t0=$SECONDS
  # shellcheck disable=SC2086  # $extra is a list of flags
  timeout -k 5 "$(left 120)" "${launch[@]}" --nproc-per-node "$procs" -- bash -c "$per_rank" \
    "$bin/mp_pipeline_check" --schedule 1F1B --device cuda --tolerance 1e-4 $extra \
    >"$logs/$log" 2>&1
  rc=$?
  # Each rank's pipeline makes two group communicators (and splits links from them); each dp
  # replica group one more: at least 2 per rank, 3 with --dp.
  verdict=$(judge_nccl "$logs/$log" "$rc" "$want")
  row gpu "$name" "${verdict%% *}" "${verdict#* }; $((SECONDS - t0)) s"
done

step "bench_cuda_kernels" 60 bench_cuda_kernels.log -- "$bin/bench_cuda_kernels"
exit $((failures > 0))
