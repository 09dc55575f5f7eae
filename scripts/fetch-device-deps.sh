#!/usr/bin/env bash
# Downloads the Debian 12 packages that the GPU machine's build needs into
# .device-deps/ (git-ignored). That machine has CUDA, CMake, ninja and Python
# but none of Debian's -dev packages and no package registry, so the .deb
# files travel with the call and scripts/device-check.sh unpacks them there
# (dpkg -x into a prefix the build points at). About 2 MB; idempotent.
#
#   scripts/fetch-device-deps.sh
#   then, through the device tool: bash scripts/device-check.sh, carrying .device-deps
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(libabsl-dev libabsl20220623 libgtest-dev libgmock-dev nlohmann-json3-dev)
mkdir -p .device-deps
cd .device-deps
missing=()
for p in "${packages[@]}"; do
  ls "${p}"_*.deb >/dev/null 2>&1 || missing+=("$p")
done
if ((${#missing[@]})); then
  apt-get download "${missing[@]}"
fi
ls -l ./*.deb
