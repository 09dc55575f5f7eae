#!/usr/bin/env bash
# Serves the OpenAI-compatible HTTP API on loopback: installs what is missing,
# builds the servers and the gateway, fetches the default model (unless
# --model names another GGUF), starts the tokenizer service, the model service
# and llm_gateway, waits until all three are healthy, prints
# "gateway listening on http://127.0.0.1:PORT", and serves until Ctrl-C or
# SIGTERM (then stops all three). docs/gateway.md describes the API.
#
# Usage: scripts/serve.sh [--port N] [--model PATH] [--no-build]
#   scripts/serve.sh
#   curl -s localhost:8080/v1/chat/completions -d '{"model": "...", "messages": [...]}'
# --port 0 picks a free port (the line above names it); --no-build skips the
# packages, the build and the model download (what build/ and models/ hold is
# used as it is). SIGTERM stops all three and exits 0; Ctrl-C exits 130.
set -euo pipefail
cd "$(dirname "$0")/.."

PORT=8080
MODEL=models/SmolLM2-135M-Instruct.Q4_1.gguf
BUILD=1
usage="usage: scripts/serve.sh [--port N] [--model PATH] [--no-build]"
while [[ $# -gt 0 ]]; do
  case $1 in
    --port) PORT=${2:?--port needs a value}; shift 2 ;;
    --model) MODEL=${2:?--model needs a path}; shift 2 ;;
    --no-build) BUILD=0; shift ;;
    -h|--help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "serve.sh: unknown argument '$1' ($usage)" >&2; exit 2 ;;
  esac
done
[[ $PORT =~ ^[0-9]+$ && $PORT -le 65535 ]] || { echo "serve.sh: --port must be 0..65535 ($usage)" >&2; exit 2; }
step() { printf '== %s\n' "$*" >&2; }

if ((BUILD)); then
  step "1/4 installing missing Debian packages (first run only)"
  bash scripts/setup.sh >&2
  step "2/4 building tokenizer_server, model_server, llm and llm_gateway"
  cmake --preset default >/dev/null
  cmake --build --preset default -j"$(nproc)" --target tokenizer_server model_server llm llm_gateway >&2
else
  step "1-2/4 --no-build: using the binaries in ${LLM_BIN_DIR:-build/bin}"
fi
if [[ $MODEL == models/SmolLM2-135M-Instruct.Q4_1.gguf ]] && ((BUILD)); then
  step "3/4 fetching the default model"
  bash scripts/fetch-model.sh >&2
else
  step "3/4 using $MODEL"
  [[ -f $MODEL ]] || { echo "serve.sh: no such model file: $MODEL" >&2; exit 2; }
fi

step "4/4 starting the tokenizer service, the model service and the gateway"
# start_services, start_server: scripts/lib/servers.sh (sets $tmp, $tok,
# $model, $port; an EXIT trap stops the servers).
source scripts/lib/servers.sh
start_services "$MODEL"
trap 'exit 0' TERM  # asked to stop: a normal end (the EXIT trap stops the servers)
# The gateway listens on the port asked for (start_server passes port 0 first;
# a later --listen wins).
start_server "$tmp" llm_gateway --tokenizer "$tok" --model "$model" \
  --listen "127.0.0.1:$PORT" || exit 1
url=http://127.0.0.1:$port
for _ in $(seq 1 100); do
  curl -sf "$url/health" >/dev/null 2>&1 && break
  sleep 0.1
done
if ! curl -sf "$url/health" >/dev/null 2>&1; then
  curl -s "$url/health" >&2 || true
  cat "$tmp"/*.log >&2
  exit 1
fi
model_id=$(curl -s "$url/v1/models" | sed -n 's/.*"id":"\([^"]*\)".*/\1/p')
echo "tokenizer_server on $tok, model_server on $model, model id '$model_id'" >&2
echo "gateway listening on $url"
# Serve until a signal (the INT/TERM trap exits, and stop_servers stops all three)
# or until a server exits.
while true; do
  for p in "${pids[@]}"; do
    if ! kill -0 "$p" 2>/dev/null; then
      echo "serve.sh: a server exited; its log:" >&2
      cat "$tmp"/*.log >&2
      exit 1
    fi
  done
  sleep 1
done
