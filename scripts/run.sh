#!/usr/bin/env bash
# The main job, on a fresh Debian 12 machine: installs what is missing, builds,
# fetches the default model (SmolLM2-135M-Instruct), starts the tokenizer
# service on loopback with the model's vocabulary, waits until it is healthy,
# and round-trips the prompt through it (text -> ids -> text). Stops the
# server on exit.
#
# Usage: scripts/run.sh [PROMPT]
#
# The model service (issue 3) and streamed generation (issue 4) will join this
# script; until then it demonstrates the tokenizer service.
set -euo pipefail
cd "$(dirname "$0")/.."

PROMPT=${1:-"What is the capital of France? Answer in one word."}
MODEL=models/SmolLM2-135M-Instruct.Q4_1.gguf
step() { printf '== %s\n' "$*" >&2; }

step "1/4 installing missing Debian packages (first run only)"
bash scripts/setup.sh >&2
step "2/4 building (first run: a few minutes on 2 cores)"
cmake --preset default >/dev/null
cmake --build --preset default -j"$(nproc)" --target tokenizer_server llm >&2
step "3/4 fetching the default model"
bash scripts/fetch-model.sh >&2

step "4/4 starting tokenizer_server on loopback"
log=$(mktemp)
build/bin/tokenizer_server --vocab "$MODEL" --listen 127.0.0.1:0 >"$log" 2>&1 &
server=$!
trap 'kill -TERM $server 2>/dev/null; wait $server 2>/dev/null; rm -f "$log"' EXIT
port=""
for _ in $(seq 1 100); do
  port=$(sed -n 's/.*listening on port \([0-9]*\).*/\1/p' "$log")
  [[ -n $port ]] && break
  kill -0 $server 2>/dev/null || { cat "$log" >&2; exit 1; }
  sleep 0.1
done
[[ -n $port ]] || { echo "tokenizer_server did not start" >&2; cat "$log" >&2; exit 1; }
echo "tokenizer_server: serving $MODEL on 127.0.0.1:$port" >&2

json=$(python3 -c 'import json,sys; print(json.dumps({"text": sys.argv[1]}))' "$PROMPT")
ids=$(echo "$json" | build/bin/llm tokenize --server "127.0.0.1:$port")
echo "prompt: $PROMPT"
echo "tokens: $ids"
echo "decoded: $(echo "$ids" | build/bin/llm detokenize --server "127.0.0.1:$port")"
