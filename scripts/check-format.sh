#!/usr/bin/env bash
# Checks that every C++ and CUDA source is formatted by .clang-format (Google
# style, 100 columns). Exit 0: all formatted; 1: the files that are not, with
# the command that fixes them; 77 (skipped): clang-format is not installed.
#
#   scripts/check-format.sh
set -uo pipefail
cd "$(dirname "$0")/.."
if ! command -v clang-format >/dev/null; then
  echo "check-format: clang-format is not installed (apt-get install clang-format)"
  exit 77
fi
mapfile -t files < <(find common tokenizer_svc model_svc sampler client proto tests bench \
  \( -name '*.cc' -o -name '*.h' -o -name '*.cu' \) -not -path '*/build*' | sort)
bad=()
for f in "${files[@]}"; do
  clang-format --dry-run -Werror "$f" >/dev/null 2>&1 || bad+=("$f")
done
if ((${#bad[@]})); then
  echo "check-format: ${#bad[@]} of ${#files[@]} files are not clang-formatted:"
  printf '  %s\n' "${bad[@]}"
  echo "fix: clang-format -i ${bad[*]}"
  exit 1
fi
echo "check-format: ${#files[@]} files formatted ($(clang-format --version))"
