#!/usr/bin/env bash
# Serves the OpenAI-compatible HTTP API on loopback: installs what is missing,
# builds the servers and the gateway, fetches the default model (unless
# --model names another GGUF), starts the tokenizer service, the model service
# and llm_gateway, waits until all three are healthy, prints
# "gateway listening on http://127.0.0.1:PORT", and serves until Ctrl-C or
# SIGTERM (then stops all three). docs/gateway.md describes the API.
#
# Usage: scripts/serve.sh [--port N] [--model PATH] [--no-build] [--no-metrics]
#                         [--tokenizer-flag F]... [--model-flag F]... [--gateway-flag F]...
#   scripts/serve.sh
#   curl -s localhost:8080/v1/chat/completions -d '{"model": "SmolLM2-135M-Instruct",
#     "messages": [{"role": "user", "content": "Hi"}]}'
#   scripts/serve.sh --gateway-flag --served_model_name=smol --gateway-flag --speculate=3
#   scripts/serve.sh --model-flag=--kv_cache_mb=256 --model-flag=--log_level=info
# --port 0 picks a free port (the line above names it); --no-build skips the
# packages, the build and the model download (what build/ and models/ hold is
# used as it is). --tokenizer-flag, --model-flag and --gateway-flag (each
# repeatable, one argument each) pass a flag to tokenizer_server, model_server
# or llm_gateway; a flag given again overrides serve.sh's own. The servers'
# startup notes, warnings and errors are shown on stderr as they come (the two
# services log at --log_level warning: pass --log_level=info for a line a
# call). Both services serve Prometheus metrics on free ports, printed when all
# are up (--no-metrics: off); the gateway's are at its URL's /metrics. SIGTERM
# stops all three and exits 0; Ctrl-C exits 130.
set -euo pipefail
cd "$(dirname "$0")/.."

PORT=8080
MODEL=models/SmolLM2-135M-Instruct.Q4_1.gguf
BUILD=1
METRICS=1
tokenizer_flags=(--log_level warning)
model_flags=(--log_level warning)
gateway_flags=()
usage="usage: scripts/serve.sh [--port N] [--model PATH] [--no-build] [--no-metrics] \
[--tokenizer-flag F] [--model-flag F] [--gateway-flag F] (--help: more)"
value() {  # value OPTION ARGS...: the option's value, from "--opt=V" or "--opt V"
  local opt=$1
  shift
  if [[ $1 == *=* ]]; then
    printf '%s' "${1#*=}"
  elif [[ $# -ge 2 ]]; then
    printf '%s' "$2"
  else
    echo "serve.sh: $opt needs a value ($usage)" >&2
    return 2
  fi
}
while [[ $# -gt 0 ]]; do
  case $1 in
    --port|--port=*) PORT=$(value --port "$@") || exit 2 ;;
    --model|--model=*) MODEL=$(value --model "$@") || exit 2 ;;
    --tokenizer-flag|--tokenizer-flag=*)
      tokenizer_flags+=("$(value --tokenizer-flag "$@")") || exit 2 ;;
    --model-flag|--model-flag=*) model_flags+=("$(value --model-flag "$@")") || exit 2 ;;
    --gateway-flag|--gateway-flag=*) gateway_flags+=("$(value --gateway-flag "$@")") || exit 2 ;;
    --no-build) BUILD=0 ;;
    --no-metrics) METRICS=0 ;;
    -h|--help) sed -n '2,25p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "serve.sh: unknown argument '$1' ($usage)" >&2; exit 2 ;;
  esac
  # An option with a separate value takes two arguments.
  if [[ $1 != *=* && $1 =~ ^--(port|model|tokenizer-flag|model-flag|gateway-flag)$ ]]; then
    shift 2
  else
    shift
  fi
done
[[ $PORT =~ ^[0-9]+$ && $PORT -le 65535 ]] || { echo "serve.sh: --port must be 0..65535 ($usage)" >&2; exit 2; }
[[ -n $MODEL ]] || { echo "serve.sh: --model needs a path ($usage)" >&2; exit 2; }
if ((METRICS)); then
  tokenizer_flags=(--metrics_listen 127.0.0.1:0 "${tokenizer_flags[@]}")
  model_flags=(--metrics_listen 127.0.0.1:0 "${model_flags[@]}")
fi
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
# $model, $port, $pids, $pid_names; an EXIT trap stops the servers). The
# servers' stderr comes here as it is written.
source scripts/lib/servers.sh
show_server_stderr=1
start_services "$MODEL"
trap 'exit 0' TERM  # asked to stop: a normal end (the EXIT trap stops the servers)
# The gateway listens on the port asked for (start_server passes port 0 first;
# a later --listen wins).
start_server "$tmp" llm_gateway --tokenizer "$tok" --model "$model" \
  --listen "127.0.0.1:$PORT" ${gateway_flags[@]+"${gateway_flags[@]}"} || exit 1
url=http://127.0.0.1:$port
for _ in $(seq 1 100); do
  curl -sf "$url/health" >/dev/null 2>&1 && break
  sleep 0.1
done
if ! curl -sf "$url/health" >/dev/null 2>&1; then
  curl -s "$url/health" >&2 || true
  exit 1
fi
# "NAME: metrics on port N" follows a server's port line on its stdout.
metrics_of() {
  local m _
  for _ in $(seq 1 50); do
    m=$(sed -n 's/.*: metrics on port \([0-9]*\).*/\1/p' "$tmp/$1.out" 2>/dev/null || true)
    [[ -n $m ]] && { echo "metrics on http://127.0.0.1:$m/metrics"; return; }
    sleep 0.1
  done
  echo "no metrics"
}
model_id=$(curl -s "$url/v1/models" | sed -n 's/.*"id":"\([^"]*\)".*/\1/p')
echo "tokenizer_server on $tok, $(metrics_of tokenizer_server)" >&2
echo "model_server on $model, $(metrics_of model_server)" >&2
echo "llm_gateway: model id '$model_id', metrics on $url/metrics" >&2
echo "gateway listening on $url"
# Serve until a signal (the INT/TERM trap exits, and stop_servers stops all three)
# or until a server exits (its stderr has been shown).
while true; do
  for i in "${!pids[@]}"; do
    if ! kill -0 "${pids[$i]}" 2>/dev/null; then
      rc=0
      wait "${pids[$i]}" || rc=$?
      echo "serve.sh: ${pid_names[$i]} exited (status $rc); stopping the others" >&2
      exit 1
    fi
  done
  sleep 1
done
