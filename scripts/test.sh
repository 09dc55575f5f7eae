#!/usr/bin/env bash
# Runs every test on a fresh Debian 12 machine: installs what is missing,
# configures and builds (preset "default"), runs the whole ctest suite, then
# builds the libFuzzer targets with clang (preset "fuzz") and runs each of
# them briefly.
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n== %s\n' "$*"; }
jobs=$(nproc)

step "setup: Debian packages"
bash scripts/setup.sh

step "default model (models/, checked by SHA-256)"
bash scripts/fetch-model.sh

step "Gemma 3 270M (its SentencePiece vocabulary and gemma3_model_test)"
bash scripts/fetch-model.sh gemma3-270m

step "configure and build (preset default)"
cmake --preset default
cmake --build --preset default -j"$jobs"

step "tests (ctest, preset default)"
ctest --preset default -j"$jobs"

step "fuzzers: build with clang-14 (preset fuzz) and run each briefly"
cmake --preset fuzz
cmake --build --preset fuzz -j"$jobs"
ctest --preset fuzz
