#!/usr/bin/env bash
# The includes half of llm_layer_check (CMakeLists.txt): every
# "model_svc/..." include of a header or source (.h, .cc, .cu) in the layer's
# folders names a header in those folders or in the folders of the layers
# directly below it. Tests (*_test.cc) and test support (*_testing.h) are
# exempt: they link the test libraries, above every layer. Folders are
# relative to SOURCE_ROOT and not searched recursively (backend/ and
# backend/cpu/ are two layers).
#
#   scripts/check-layer-includes.sh LIB SOURCE_ROOT --dirs FOLDER... [--below FOLDER...]
#
# Exit 0: every include is allowed; 1: the ones that are not, each as
# FILE:LINE with the include and what the layer may include; 2: bad usage.
set -uo pipefail

if (($# < 4)) || [[ $3 != --dirs ]]; then
  echo "usage: $0 LIB SOURCE_ROOT --dirs FOLDER... [--below FOLDER...]" >&2
  exit 2
fi
lib=$1
root=$2
shift 3
dirs=()
below=()
into=dirs
for arg; do
  if [[ $arg == --below ]]; then
    into=below
  elif [[ $into == dirs ]]; then
    dirs+=("${arg%/}")
  else
    below+=("${arg%/}")
  fi
done

allowed=" ${dirs[*]} ${below[*]} "
may=$(echo ${allowed} | sed 's/ /, /g')
bad=0
checked=0
for dir in "${dirs[@]}"; do
  if [[ ! -d $root/$dir ]]; then
    echo "check-layer-includes: $lib: no folder $root/$dir" >&2
    exit 2
  fi
  for file in "$root/$dir"/*.h "$root/$dir"/*.cc "$root/$dir"/*.cu; do
    [[ -f $file ]] || continue
    case $file in
      *_test.cc | *_testing.h) continue ;;
    esac
    checked=$((checked + 1))
    while IFS=: read -r line header; do
      if [[ $allowed != *" ${header%/*} "* ]]; then
        echo "$dir/${file##*/}:$line: includes $header, which is not in $lib's layer or" \
          "one directly below it: $lib may include model_svc/ headers from $may only" >&2
        bad=$((bad + 1))
      fi
    done < <(grep -n -E '^[[:space:]]*#[[:space:]]*include[[:space:]]*"model_svc/' "$file" |
      sed -E 's|^([0-9]+):[^"]*"([^"]*)".*|\1:\2|')
  done
done
if ((bad)); then
  echo "check-layer-includes: $lib: $bad include(s) from a layer that is not below it" >&2
  exit 1
fi
echo "check-layer-includes: $lib: $checked files include only their layer and those below"
