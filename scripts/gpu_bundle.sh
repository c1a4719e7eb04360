#!/usr/bin/env bash
# Builds the CUDA configuration on this machine (no GPU needed: Release, sm_90, CUDA runtime linked
# in, NCCL required) and packs what the GPU check needs into one .tar.gz for a bare GPU machine:
# the stripped test and benchmark executables, every shared library they load that such a machine
# lacks (CAF, UCX and its transport modules, oneDNN, Highway, spdlog, fmt, OpenMP, the C++ runtime,
# ...), a MANIFEST, and gpu_check.sh. cuBLAS and NCCL are left to the GPU machine (its CUDA
# installation or PyTorch's pip wheels): the check finds them there.
#
#   scripts/gpu_bundle.sh [output.tar.gz]        default: <build dir>/tensorplay-gpu.tar.gz
#   BUILD_DIR=/tmp/b JOBS=2 CUDA_ARCH=90 scripts/gpu_bundle.sh
#   BUILD_DIR=build REUSE_BUILD=1 scripts/gpu_bundle.sh   pack from a build configured alike
#   scripts/gpu_bundle.sh --verify FILE          unpack FILE into an empty folder and check that
#                                                every library resolves from the bundle alone
#
# On the GPU machine: tar xzf tensorplay-gpu.tar.gz && tensorplay-gpu/gpu_check.sh
# (gzip, not xz: every image has it). The C++ runtime travels in lib/cxx, which the check uses
# only where the machine's glibc is new enough for it (MANIFEST: glibc_cxx). The source and the
# Debian packages of the build's dependencies travel in fallback/ (FALLBACK=0: not), for the
# check to build from where the binaries do not run.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
limit_mib=${LIMIT_MIB:-60}
# Libraries a bundle never carries: the CUDA ones (from the GPU machine) and the C runtime and
# loader (from its system). ldd may leave exactly these unresolved.
system_libs='^(linux-vdso|ld-linux|libc\.so|libm\.so|libdl\.so|librt\.so|libpthread\.so|libresolv\.so|libutil\.so|libcuda\.so|libcudart\.so|libcublas\.so|libcublasLt\.so|libnccl\.so|libnvidia-ml\.so|libnvrtc\.so)'

# Checks an unpacked or packed bundle: each ELF under bin/ and lib/, with LD_LIBRARY_PATH cleared
# to the bundle's lib/ only, resolves every library except the system ones above.
verify() {
  local file=$1 dir bad=0 f missing
  dir=$(mktemp -d)
  tar -xzf "$file" -C "$dir"
  local top=$dir/tensorplay-gpu
  [ -x "$top/gpu_check.sh" ] || { echo "gpu_bundle: $file has no tensorplay-gpu/gpu_check.sh"; return 1; }
  while IFS= read -r f; do
    head -c 4 "$f" | grep -q ELF || continue
    missing=$(env -i PATH="$PATH" LD_LIBRARY_PATH="$top/lib:$top/lib/cxx" ldd "$f" 2>&1 |
      awk '/not found/ {print $1}' | grep -vE "$system_libs" || true)
    if [ -n "$missing" ]; then
      echo "gpu_bundle: ${f#"$top"/} needs what the bundle lacks: $(echo $missing)"
      bad=1
    fi
  done < <(find "$top/bin" "$top/lib" -type f)
  local count
  count=$(find "$top/bin" "$top/lib" -type f | wc -l)
  rm -rf "$dir"
  [ $bad -eq 0 ] && echo "gpu_bundle: $count files; every library resolves from the bundle," \
    "except the CUDA and C runtime ones"
  return $bad
}

if [ "${1:-}" = --verify ]; then
  verify "$2"
  exit $?
fi

build=${BUILD_DIR:-$root/build-gpu-bundle}
out=${1:-$build/tensorplay-gpu.tar.gz}
jobs=${JOBS:-2}
arch=${CUDA_ARCH:-90}
targets=(test_tensors test_transport test_actors mp_pipeline_check tp-launch bench_cuda_kernels)

generator=()
command -v ninja >/dev/null 2>&1 && generator=(-G Ninja)
launcher=()
if command -v ccache >/dev/null 2>&1; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
fi
nvcc=${CUDACXX:-/usr/local/cuda/bin/nvcc}
[ -x "$nvcc" ] || nvcc=$(command -v nvcc || true)
[ -n "$nvcc" ] || { echo "gpu_bundle: nvcc not found; install the CUDA toolkit or set CUDACXX"; exit 1; }

# REUSE_BUILD=1: an existing build folder serves as it is (the test suite's own build, which is
# configured alike: Release, the CUDA runtime linked in, NCCL found), instead of a second build.
reuse_checks() {
  local cache=$build/CMakeCache.txt built_arch
  [ -f "$cache" ] || { echo "gpu_bundle: REUSE_BUILD=1 but $build holds no CMake build"; exit 1; }
  need() {
    grep -qE "^$1" "$cache" ||
      { echo "gpu_bundle: $build cannot serve the bundle: it is not $2 (unset REUSE_BUILD to make a build that is)"; exit 1; }
  }
  need 'CMAKE_BUILD_TYPE:STRING=Release$' "a Release build"
  need 'TENSORPLAY_CUDA_STATIC_RUNTIME:BOOL=ON$' "linked with the CUDA runtime inside (TENSORPLAY_CUDA_STATIC_RUNTIME=ON)"
  need 'NCCL_LIBRARY:FILEPATH=/' "built with NCCL"
  built_arch=$(sed -n 's/^CMAKE_CUDA_ARCHITECTURES:[A-Z]*=//p' "$cache")
  [ "${built_arch:-90}" = "$arch" ] ||
    { echo "gpu_bundle: $build is built for CUDA architectures ${built_arch}, not $arch"; exit 1; }
}
if [ "${REUSE_BUILD:-0}" = 1 ]; then
  reuse_checks
  echo "gpu_bundle: reusing $build (CUDA architectures $arch)"
else
  echo "gpu_bundle: configuring $build (CUDA architectures $arch)"
  mkdir -p "$build"
  cmake -S "$root" -B "$build" "${generator[@]}" "${launcher[@]}" -DCMAKE_BUILD_TYPE=Release \
    -DTENSORPLAY_CUDA=ON -DCMAKE_CUDA_COMPILER="$nvcc" -DCMAKE_CUDA_ARCHITECTURES="$arch" \
    -DTENSORPLAY_REQUIRE_NCCL=ON -DTENSORPLAY_CUDA_STATIC_RUNTIME=ON \
    -DTENSORPLAY_BUILD_EXAMPLES=OFF >"$build/configure.log" 2>&1 ||
    { tail -20 "$build/configure.log"; echo "gpu_bundle: configure failed (see $build/configure.log)"; exit 1; }
fi
echo "gpu_bundle: building ${targets[*]} (-j $jobs)"
cmake --build "$build" -j "$jobs" --target "${targets[@]}"

stage_root=$(mktemp -d)
trap 'rm -rf "$stage_root"' EXIT
stage=$stage_root/tensorplay-gpu
mkdir -p "$stage/bin" "$stage/lib/ucx" "$stage/lib/cxx"
for t in "${targets[@]}"; do
  path=$(find "$build" -type f -name "$t" -perm -u+x -not -path '*/CMakeFiles/*' | head -1)
  [ -n "$path" ] || { echo "gpu_bundle: $t was not built"; exit 1; }
  cp "$path" "$stage/bin/$t"
  strip --strip-unneeded "$stage/bin/$t"
done
cp "$root/scripts/gpu_check.sh" "$stage/gpu_check.sh"
cp "$root/scripts/gpu_check_self_test.sh" "$stage/gpu_check_self_test.sh"
chmod +x "$stage/gpu_check.sh"

# Every library the binaries (and UCX's modules) load, by soname, minus the system ones. The C++
# runtime goes to lib/cxx: it may need a newer glibc than the GPU machine has, whose own C++
# runtime then serves.
add_libs_of() {
  local f=$1 name path to
  while read -r name path; do
    [[ "$name" =~ $system_libs ]] && continue
    to=$stage/lib
    [[ "$name" =~ ^(libstdc\+\+|libgcc_s)\.so ]] && to=$stage/lib/cxx
    [ -e "$to/$name" ] && continue
    [ -f "$path" ] || { echo "gpu_bundle: $f needs $name, not found here"; exit 1; }
    cp -L "$path" "$to/$name"
    echo "$path" >>"$stage_root/lib_sources"
    chmod u+w "$to/$name"
    strip --strip-unneeded "$to/$name" 2>/dev/null || true
  done < <(ldd "$f" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}')
}
for b in "$stage"/bin/*; do add_libs_of "$b"; done
# UCX loads its transports at run time from <libucp's folder>/ucx (the check points UCX_MODULE_DIR
# there): the shared-memory and TCP ones, and their libraries. InfiniBand and GPU transports are
# left out (they need verbs or CUDA builds of UCX; loopback runs do not use them).
ucp=$(ldd "$stage/bin/test_transport" | awk '$1 ~ /^libucp\.so/ {print $3}')
ucx_modules=$(dirname "$ucp")/ucx
if [ -d "$ucx_modules" ]; then
  for m in "$ucx_modules"/*.so.[0-9]; do  # one file per module, by soname
    [ -e "$m" ] || continue
    case $(basename "$m") in *_ib*|*rdmacm*|*_cuda*|*_rocm*|*_gdr*|*_ze*|*mlx5*|*_efa*) continue ;; esac
    cp -L "$m" "$stage/lib/ucx/"
    add_libs_of "$m"
  done
fi

# The Debian packages owning what the build found (the CMake cache's libraries and package
# folders under /usr) and what the bundle carries; those every CUDA image has are left out.
debian_packages() {
  local cache=$1 sources=$2 p
  {
    sed -n -E 's/^[A-Za-z0-9_]+(_LIBRARY[A-Z_]*:FILEPATH|_DIR:PATH)=(\/usr\/.*)$/\2/p' "$cache"
    cat "$sources"
    alternatives | cut -d' ' -f2
  } | sort -u | while read -r p; do
    [ -e "$p" ] || continue
    dpkg -S "$p" 2>/dev/null | cut -d: -f1
    [ "$(readlink -f "$p")" = "$p" ] || dpkg -S "$(readlink -f "$p")" 2>/dev/null | cut -d: -f1
  done | tr ', ' '\n\n' | grep -vE '^$|^(libc6|libc6-dev|libgomp1|libstdc\+\+|libgcc|gcc|g\+\+|cpp|binutils|linux-libc-dev)' |
    sort -u
}
# The alternatives links (BLAS, LAPACK) as "link target": dpkg -x makes none, the prefix needs
# them (cblas.h, libopenblas.so).
alternatives() {
  find /usr/include /usr/lib/x86_64-linux-gnu -maxdepth 2 -lname '/etc/alternatives/*' |
    grep -iE 'blas|lapack' | while read -r l; do echo "$l $(readlink -f "$l")"; done
}
# Copies the packages' .deb files (apt's cache, else apt-get download), the committed source, and
# the CMake cache entries to pin in the prefix (fallback/cache_args) into $1.
carry_fallback() {
  local dest=$1 pkg ver arch deb missing=()
  mkdir -p "$dest/debs"
  for pkg in $(debian_packages "$build/CMakeCache.txt" "$stage_root/lib_sources"); do
    read -r ver arch < <(dpkg-query -W -f='${Version} ${Architecture}\n' "$pkg" 2>/dev/null | head -1)
    [ -n "${ver:-}" ] || continue
    deb=/var/cache/apt/archives/${pkg}_${ver//:/%3a}_${arch}.deb
    if [ -f "$deb" ]; then cp "$deb" "$dest/debs/"; else
      (cd "$dest/debs" && apt-get download "$pkg=$ver" >/dev/null 2>&1) || missing+=("$pkg=$ver")
    fi
    echo "$pkg $ver" >>"$dest/PACKAGES"
  done
  [ ${#missing[@]} -eq 0 ] || {
    echo "gpu_bundle: no .deb for ${missing[*]}: run apt-get download for them, or FALLBACK=0"
    exit 1
  }
  git -C "$root" archive --format=tar.gz -o "$dest/src.tar.gz" HEAD
  # Each library the build found in a carried package, by the file that package holds (dpkg -x
  # runs no maintainer scripts: alternatives links dangle); the others come from the GPU machine.
  local name path file owner
  sed -n -E 's/^([A-Za-z0-9_]+_LIBRARY[A-Z_]*):FILEPATH=(\/usr\/.*)$/\1 \2/p' "$build/CMakeCache.txt" |
    while read -r name path; do
      for file in "$path" "$(readlink -f "$path")"; do
        owner=$(dpkg -S "$file" 2>/dev/null | cut -d: -f1 || true)
        if [ -n "$owner" ] && grep -qx "$owner .*" "$dest/PACKAGES"; then
          echo "-D$name=@PREFIX@$file"
          break
        fi
      done
    done >"$dest/cache_args"
  alternatives >"$dest/links"
  echo "gpu_bundle: fallback: $(wc -l <"$dest/PACKAGES") Debian packages" \
    "($(du -sh "$dest/debs" | cut -f1)) and the source ($(du -sh "$dest/src.tar.gz" | cut -f1))"
}

# What the GPU machine must provide, for the check's preflight.
cuda_libs=$(for b in "$stage"/bin/*; do ldd "$b"; done | awk '{print $1}' |
  grep -E '^(libcublas|libcublasLt|libnccl|libcudart)\.so' | sort -u | tr '\n' ' ')
newest_glibc() {  # the newest GLIBC_ symbol version the given files need
  local f
  for f in "$@"; do objdump -T "$f" 2>/dev/null; done | grep -o 'GLIBC_[0-9.]*' | sed 's/GLIBC_//' |
    sort -uV | tail -1
}
glibc=$(newest_glibc "$stage"/bin/* "$stage"/lib/*.so* "$stage"/lib/ucx/*)
glibc_cxx=$(newest_glibc "$stage"/lib/cxx/*)
cuda_version=$("$nvcc" --version | grep -o 'release [0-9.]*' | grep -o '[0-9.]*$')
{
  echo "commit=$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)"
  echo "built=$(date -u +%Y-%m-%dT%H:%MZ)"
  echo "cuda_arch=$arch"
  echo "cuda_runtime=$cuda_version"
  echo "cuda_libs=${cuda_libs% }"
  echo "glibc=$glibc"
  echo "glibc_cxx=$glibc_cxx"
} >"$stage/MANIFEST"

# The fallback (FALLBACK=0 leaves it out): where the binaries do not run on the GPU machine, the
# check builds them there from the source and the Debian packages this build used, unpacked with
# dpkg -x into a prefix (gpu_check.sh, fallback_build).
if [ "${FALLBACK:-1}" = 1 ]; then
  carry_fallback "$stage/fallback"
  echo "fallback_mib=$(($(du -sk "$stage/fallback" | cut -f1) / 1024))" >>"$stage/MANIFEST"
fi

mkdir -p "$(dirname "$out")"
echo "gpu_bundle: packing $(du -sh "$stage" | cut -f1) into $out"
tar -C "$stage_root" -cf - tensorplay-gpu | gzip -9 >"$out"
size=$(stat -c %s "$out")
echo "gpu_bundle: $out is $((size / 1048576)) MiB ($size bytes); limit $limit_mib MiB"
cat "$stage/MANIFEST"
if [ "$size" -gt $((limit_mib * 1048576)) ]; then
  echo "gpu_bundle: the bundle is over $limit_mib MiB"
  exit 1
fi
verify "$out"
