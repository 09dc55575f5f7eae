#!/usr/bin/env bash
# Long fuzzing runs, outside CI: builds the libFuzzer targets (preset "fuzz",
# clang-14 with ASan and UBSan) and runs each for RUNS executions (default
# 10^7) over its seed corpus in the repository (the directory its ctest short
# run also reads). New inputs that add coverage are merged back into that
# corpus (-merge=1 keeps only inputs that add coverage), so it stays small and
# useful; commit it.
# A crash stops that fuzzer and leaves the input as build-fuzz/long/NAME/crash-*:
# turn it into a test before anything else.
#
# Usage: scripts/fuzz-long.sh [--runs N] [--max-time SECONDS] [FUZZER...]
#   scripts/fuzz-long.sh                       # all of them, 10^7 executions each
#   scripts/fuzz-long.sh --runs 100000 gguf_fuzzer
#   scripts/fuzz-long.sh --max-time 1800 model_load_fuzzer  # stop after 30 min
#
# Prints one line per fuzzer: executions done, seconds, corpus size; the same
# lines go to build-fuzz/long/summary.txt. bench/README.md ("Fuzzing") keeps
# the counts of the last long run.
set -euo pipefail
cd "$(dirname "$0")/.."

runs=10000000
max_time=0  # 0: no limit
fuzzers=()
while (($#)); do
  case $1 in
    --runs) runs=$2; shift 2 ;;
    --max-time) max_time=$2; shift 2 ;;
    -h | --help) sed -n '2,19p' "$0"; exit 0 ;;
    -*) echo "fuzz-long: unknown option $1" >&2; exit 2 ;;
    *) fuzzers+=("$1"); shift ;;
  esac
done
all=(gguf_fuzzer model_load_fuzzer tokenizer_encode_fuzzer tiktoken_loader_fuzzer
  pretokenizer_diff_fuzzer gguf_vocab_fuzzer jinja_fuzzer openai_request_fuzzer gateway_fuzzer
  token_mask_fuzzer constrain_compile_fuzzer snapshot_fuzzer)
((${#fuzzers[@]})) || fuzzers=("${all[@]}")

declare -A seeds=(
  [gguf_fuzzer]=common/gguf/fuzz_seeds
  [model_load_fuzzer]=model_svc/fuzz/seeds/model_load_fuzzer
  [snapshot_fuzzer]=model_svc/fuzz/seeds/snapshot_fuzzer
  [tokenizer_encode_fuzzer]=tokenizer_svc/fuzz/seeds/tokenizer_encode_fuzzer
  [tiktoken_loader_fuzzer]=tokenizer_svc/fuzz/seeds/tiktoken_loader_fuzzer
  [pretokenizer_diff_fuzzer]=tokenizer_svc/fuzz/seeds/pretokenizer_diff_fuzzer
  [gguf_vocab_fuzzer]=tokenizer_svc/fuzz/seeds/gguf_vocab_fuzzer
  [jinja_fuzzer]=common/jinja/fuzz_seeds
  [openai_request_fuzzer]=gateway/fuzz/seeds/openai_request_fuzzer
  [gateway_fuzzer]=gateway/fuzz/seeds/gateway_fuzzer
  [token_mask_fuzzer]=common/token_mask_fuzz_seeds
  [constrain_compile_fuzzer]=client/constrain/fuzz/seeds/constrain_compile_fuzzer
)

cmake --preset fuzz >/dev/null
cmake --build --preset fuzz -j"$(nproc)" --target "${fuzzers[@]}"
out=build-fuzz/long
mkdir -p "$out"
# summary.txt collects the lines of every run (two runs may go side by side).
export LLM_SOURCE_DIR=$PWD
for f in "${fuzzers[@]}"; do
  [[ -n ${seeds[$f]+x} ]] || { echo "fuzz-long: unknown fuzzer $f" >&2; exit 2; }
  corpus=${seeds[$f]}
  work=$out/$f
  mkdir -p "$corpus" "$work"
  max_len=4096
  [[ $f == model_load_fuzzer ]] && max_len=65536
  [[ $f == jinja_fuzzer ]] && max_len=16384
  echo "== $f: $runs executions" >&2
  start=$(date +%s)
  # The working corpus grows freely; only a minimized merge goes back.
  build-fuzz/bin/$f -runs="$runs" -max_total_time="$max_time" -max_len="$max_len" -rss_limit_mb=2048 \
    -artifact_prefix="$work/" -print_final_stats=1 "$work" "$corpus" 2>"$work/log.txt" || {
    tail -30 "$work/log.txt" >&2
    echo "fuzz-long: $f failed: see $work/log.txt and $work/crash-*" >&2
    exit 1
  }
  secs=$(($(date +%s) - start))
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/log.txt" | tail -1)
  build-fuzz/bin/$f -merge=1 -max_len="$max_len" "$corpus" "$work" 2>>"$work/log.txt"
  line="$f: ${execs:-?} executions in ${secs} s, corpus $(find "$corpus" -type f | wc -l) files ($(du -sh "$corpus" | cut -f1))"
  echo "$(date -u +%FT%TZ) $line" | tee -a "$out/summary.txt"
done
