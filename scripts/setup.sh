#!/usr/bin/env bash
# Installs the Debian packages tensorplay builds against. Idempotent: installs only what is missing.
set -euo pipefail

packages=(build-essential cmake ninja-build libcaf-dev libucx-dev ucx-utils catch2 libspdlog-dev
          libopenblas-dev libdnnl-dev libhwy-dev libcli11-dev nlohmann-json3-dev zlib1g-dev clang
          libclang-rt-14-dev
          # SentencePiece: the BPE tokenizer of token shards (tensorplay/data, tools/tp-tokenize).
          libsentencepiece-dev
          # tokenizer.json: PCRE2 for the pre-tokenizers' Unicode patterns, ICU for NFC (loaded when used).
          libpcre2-dev libicu-dev
          # Gloo, PyTorch's CPU collectives: the reference bench_allreduce_backends measures against.
          libgloo-dev
          # The docs: Doxygen builds the API reference; python3 runs the docs check.
          doxygen python3
          # The cluster tests' launchers: Open MPI's and MPICH's mpirun, and a one-node Slurm
          # cluster (the tests start munged, slurmctld and slurmd themselves, without systemd).
          openmpi-bin mpich slurmctld slurmd slurm-client munge)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all packages present"
  exit 0
fi

echo "setup: installing ${missing[*]}"
sudo_cmd=()
[ "$(id -u)" -ne 0 ] && sudo_cmd=(sudo)
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
