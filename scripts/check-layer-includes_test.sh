#!/usr/bin/env bash
# scripts/check-layer-includes.sh (llm_layer_check's includes half) on a
# small tree of three layers, top over mid over low: what a layer may
# include passes, an include from a layer above (or beside) it fails naming
# the file, the line and the header, and tests are exempt.
#
#   bash scripts/check-layer-includes_test.sh
set -euo pipefail
cd "$(dirname "$0")/.."

source tests/lib/check.sh  # check NAME STATUS; passed, failures

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work"/model_svc/{low,mid,mid/sub,top}
printf '#include <vector>\n#include "common/status_macros.h"\n' >"$work/model_svc/low/low.h"
printf '#include "model_svc/low/low.h"\n#include "model_svc/mid/mid.h"\n' \
  >"$work/model_svc/mid/mid.h"
printf '#include "model_svc/mid/mid.h"\n' >"$work/model_svc/top/top.h"
printf '#include "model_svc/mid/sub/sub.h"\n' >"$work/model_svc/mid/sub/sub.h"
run() {  # run LIB FOLDER BELOW...: the checker's exit status, its stderr in $work/err
  local lib=$1 dir=$2
  shift 2
  rc=0
  bash scripts/check-layer-includes.sh "$lib" "$work" --dirs "$dir" --below "$@" \
    >"$work/out" 2>"$work/err" || rc=$?
}

run mid model_svc/mid model_svc/low
check "a layer including itself and the layer below passes (rc $rc)" "$([[ $rc == 0 ]]; echo $?)"
run low model_svc/low
check "a layer including only common/ and the standard library passes (rc $rc)" \
  "$([[ $rc == 0 ]]; echo $?)"

# The regression this check exists for: a low layer's header including one above it.
printf '#include "model_svc/low/low.h"\n\n#include "model_svc/top/top.h"\n' \
  >"$work/model_svc/low/bad.cc"
run low model_svc/low
check "an include from a layer above fails (rc $rc)" "$([[ $rc == 1 ]]; echo $?)"
check "naming the file, the line and the header" \
  "$(grep -q '^model_svc/low/bad.cc:3: includes model_svc/top/top.h, .*low may include model_svc/ headers from model_svc/low only' "$work/err"; echo $?)"
rm "$work/model_svc/low/bad.cc"

printf '#  include  "model_svc/top/top.h"  // spaced\n' >"$work/model_svc/mid/spaced.h"
run mid model_svc/mid model_svc/low
check "a spaced-out #include is read too (rc $rc)" "$([[ $rc == 1 ]]; echo $?)"
rm "$work/model_svc/mid/spaced.h"

run mid model_svc/mid
check "a layer below must be named: mid without --below low fails (rc $rc)" \
  "$([[ $rc == 1 ]]; echo $?)"
check "and it is the one include reported" "$(grep -c '^model_svc/mid/mid.h:1: ' "$work/err" |
  grep -qx 1; echo $?)"

printf '#include "model_svc/mid/sub/sub.h"\n' >"$work/model_svc/top/deep.cc"
run top model_svc/top model_svc/mid
check "folders are not recursive: mid/ does not allow mid/sub/ (rc $rc)" \
  "$([[ $rc == 1 ]]; echo $?)"
rm "$work/model_svc/top/deep.cc"

printf '#include "model_svc/top/top.h"\n' >"$work/model_svc/low/low_test.cc"
printf '#include "model_svc/top/top.h"\n' >"$work/model_svc/low/low_testing.h"
run low model_svc/low
check "tests and test support are exempt (rc $rc)" "$([[ $rc == 0 ]]; echo $?)"

rc=0
bash scripts/check-layer-includes.sh low "$work" model_svc/low >/dev/null 2>&1 || rc=$?
check "bad usage exits 2 (rc $rc)" "$([[ $rc == 2 ]]; echo $?)"
run low model_svc/nowhere
check "a folder that does not exist exits 2 (rc $rc)" "$([[ $rc == 2 ]]; echo $?)"

echo "$passed passed, $failures failed"
((failures == 0))
