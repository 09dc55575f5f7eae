#!/usr/bin/env bash
# Gathers what the GPU machine's build needs into .device-deps/ (git-ignored).
# That machine has CUDA, CMake, ninja and Python but none of Debian's -dev
# packages and no package registry, so these travel with the call (at most
# 64 MiB in all) and scripts/device-check.sh uses them there:
#   - the Debian 12 packages (.deb, ~2 MB), unpacked with dpkg -x;
#   - llama.cpp, the side-by-side anchor: the llama-cpp-python source
#     distribution from PyPI (the version bench/model_bench.py builds, its
#     SHA-256 checked), of which only what builds llama-bench travels
#     (vendor/llama.cpp without its models, docs, tests and examples: ~8 MB
#     of the sdist's 77 MB), as llama.cpp-<version>.tar.gz.
# Idempotent.
#
#   scripts/fetch-device-deps.sh
#   then, through the device tool: bash scripts/device-check.sh, carrying .device-deps
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(libabsl-dev libabsl20220623 libgtest-dev libgmock-dev nlohmann-json3-dev libzstd-dev
  libzstd1)
LLAMA_CPP_PYTHON=0.3.36  # as bench/model_bench.py
LLAMA_CPP_PYTHON_SHA256=832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e

mkdir -p .device-deps
cd .device-deps
missing=()
for p in "${packages[@]}"; do
  ls "${p}"_*.deb >/dev/null 2>&1 || missing+=("$p")
done
if ((${#missing[@]})); then
  apt-get download "${missing[@]}"
fi

llama=llama.cpp-$LLAMA_CPP_PYTHON.tar.gz
if [ ! -f "$llama" ]; then
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  sdist=llama_cpp_python-$LLAMA_CPP_PYTHON.tar.gz
  echo "fetch-device-deps: llama-cpp-python==$LLAMA_CPP_PYTHON (source) from PyPI"
  python3 -m pip download --quiet --no-deps --no-binary :all: --disable-pip-version-check \
    -d "$work" "llama-cpp-python==$LLAMA_CPP_PYTHON"
  echo "$LLAMA_CPP_PYTHON_SHA256  $work/$sdist" | sha256sum --check --quiet ||
    { echo "fetch-device-deps: $sdist's SHA-256 is not the pinned one" >&2; exit 1; }
  tar xzf "$work/$sdist" -C "$work"
  tar czf "$work/$llama" -C "$work/llama_cpp_python-$LLAMA_CPP_PYTHON/vendor" \
    --exclude=llama.cpp/models --exclude=llama.cpp/docs --exclude=llama.cpp/media \
    --exclude=llama.cpp/benches --exclude=llama.cpp/tests --exclude=llama.cpp/examples \
    --exclude=llama.cpp/gguf-py --exclude=llama.cpp/conversion --exclude=llama.cpp/pocs \
    --exclude=llama.cpp/tools/ui --exclude=llama.cpp/scripts llama.cpp
  mv "$work/$llama" "$llama"
fi
ls -l ./*.deb ./*.tar.gz
du -sh .
