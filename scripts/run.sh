#!/usr/bin/env bash
# The main job, on a fresh Debian 12 machine: installs what is missing, builds
# the servers and the client, fetches the default model (SmolLM2-135M-Instruct),
# starts the tokenizer service (vocabulary from the model's GGUF) and the model
# service on loopback ports picked by the OS, waits until both are healthy, and
# streams the model's answer to the prompt. Stops both servers on exit.
#
# Usage: scripts/run.sh [PROMPT] [-- LLM_GENERATE_FLAGS...]
#   scripts/run.sh
#   scripts/run.sh "Write a haiku about the sea." -- --temperature 0.8 --seed 3
#
# The answer is greedy (--temperature 0) unless flags say otherwise, so the
# default question gets the same, checkable answer every time.
set -euo pipefail
cd "$(dirname "$0")/.."

PROMPT="What is the capital of France? Answer in one word."
if [[ $# -gt 0 && $1 != "--" ]]; then PROMPT=$1; shift; fi
[[ ${1:-} == "--" ]] && shift
MODEL=models/SmolLM2-135M-Instruct.Q4_1.gguf
step() { printf '== %s\n' "$*" >&2; }

step "1/5 installing missing Debian packages (first run only)"
bash scripts/setup.sh >&2
step "2/5 building tokenizer_server, model_server and llm (first run: a few minutes on 2 cores)"
cmake --preset default >/dev/null
cmake --build --preset default -j"$(nproc)" --target tokenizer_server model_server llm >&2
step "3/5 fetching the default model"
bash scripts/fetch-model.sh >&2

step "4/5 starting the tokenizer and model services on loopback"
# start_services, start_server: scripts/lib/servers.sh (sets $tmp, $tok,
# $model, $port; an EXIT trap stops the servers).
source scripts/lib/servers.sh
start_services "$MODEL"
echo "tokenizer_server on $tok, model_server on $model: both SERVING" >&2

step "5/5 generating"
echo "> $PROMPT" >&2
build/bin/llm generate --tokenizer "$tok" --model "$model" --prompt "$PROMPT" \
  --temperature 0 --max-tokens 128 "$@"
