#!/usr/bin/env bash
# Installs every Debian 12 package the build, the tests and the benchmarks need.
# Idempotent and non-interactive: when everything is present it does nothing.
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build pkg-config ccache git
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libabsl-dev libpcre2-dev nlohmann-json3-dev prometheus-cpp-dev libcivetweb-dev libssl-dev openssl
  libedit-dev
  json-schema-test-suite
  libgtest-dev libgmock-dev libbenchmark-dev
  python3-grpcio python3-grpc-tools python3-yaml python3-jsonschema
  clang-14 libclang-rt-14-dev clang-format
  python3 python3-venv python3-pip ca-certificates curl
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if ((${#missing[@]} == 0)); then
  echo "setup: all ${#PACKAGES[@]} packages present"
  exit 0
fi

SUDO=""
if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
