#!/usr/bin/env bash
# scripts/serve.sh as a user runs it (with --no-build: the build is ctest's):
# it prints "gateway listening on http://127.0.0.1:PORT" once all three servers
# are healthy, the gateway answers /health and a chat ("Paris"), and SIGTERM
# stops the tokenizer server, the model server and the gateway and exits 0.
# Also: --tokenizer-flag, --model-flag and --gateway-flag reach their servers;
# the servers' startup notes are on serve.sh's stderr (the gateway's names
# the port it bound and the model id, the file's name without .gguf and its
# quantization); both services serve metrics on the ports it prints.
# Needs models/SmolLM2-135M-Instruct.Q4_1.gguf (scripts/fetch-model.sh).
#
#   bash tests/serve_sh_test.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
export LLM_BIN_DIR=${1:-build}/bin

source tests/lib/check.sh  # check NAME STATUS; passed, failures

work=$(mktemp -d)
serve_pid=""
trap '[[ -n $serve_pid ]] && kill -TERM "$serve_pid" 2>/dev/null; rm -rf "$work"' EXIT

scripts/serve.sh --no-build --port 0 --model-flag --max_sessions=7 \
  --tokenizer-flag=--log_level=info --gateway-flag --template=chatml >"$work/out" 2>"$work/err" &
serve_pid=$!
url=""
for _ in $(seq 1 1200); do  # up to 120 s: three servers start and load
  url=$(sed -n 's/^gateway listening on \(http:.*\)$/\1/p' "$work/out")
  [[ -n $url ]] && break
  kill -0 "$serve_pid" 2>/dev/null || break
  sleep 0.1
done
check "serve.sh prints 'gateway listening on URL'" "$([[ -n $url ]]; echo $?)"
if [[ -z $url ]]; then
  cat "$work/out" "$work/err"
  exit 1
fi
children=$(pgrep -P "$serve_pid" -d ' ' || true)
for name in tokenizer_server model_server llm_gateway; do
  rc=1
  for c in $children; do [[ $(cat "/proc/$c/comm" 2>/dev/null) == "${name:0:15}" ]] && rc=0; done
  check "serve.sh runs $name" "$rc"
done

code=$(curl -s -o "$work/health" -w '%{http_code}' "$url/health")
check "GET /health is 200 ($code)" "$([[ $code == 200 ]]; echo $?)"
model_id=$(curl -s "$url/v1/models" | python3 -c 'import json,sys; print(json.load(sys.stdin)["data"][0]["id"])')
check "the model id is the file's name without its quantization ('$model_id')" \
  "$([[ $model_id == SmolLM2-135M-Instruct ]]; echo $?)"
# The gateway's startup note, with the port it bound (it was started with
# --listen 127.0.0.1:0) and the template of --gateway-flag.
note="llm_gateway: serving model '$model_id' (chatml chat template) on $url"
check "stderr shows the gateway's note '$note'" "$(grep -qxF "$note" "$work/err"; echo $?)"
check "stderr shows model_server's startup notes, with --model-flag's 7 sessions" \
  "$(grep -q '^model_server: context .* 7 sessions' "$work/err"; echo $?)"
check "a --tokenizer-flag reaches tokenizer_server (its info-level call log)" \
  "$(grep -q 'service=tokenizer method=' "$work/err"; echo $?)"
for name in tokenizer_server model_server; do
  metrics=$(sed -n "s|^$name on 127.0.0.1:[0-9]*, metrics on \(http://.*/metrics\)\$|\1|p" "$work/err")
  count=$( (curl -s "$metrics" || true) | grep -c '^llm_' || true)
  check "$name serves metrics at the URL serve.sh printed ('$metrics': $count llm_ lines)" \
    "$([[ -n $metrics && $count -gt 0 ]]; echo $?)"
done
curl -s "$url/v1/chat/completions" -H 'Content-Type: application/json' -d "{
  \"model\": \"$model_id\", \"temperature\": 0, \"max_tokens\": 16,
  \"messages\": [{\"role\": \"user\", \"content\": \"What is the capital of France? Answer in one word.\"}]
}" >"$work/chat"
answer=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["choices"][0]["message"]["content"])' "$work/chat" 2>/dev/null || true)
check "a chat through it answers Paris ('$answer')" "$([[ $answer == *Paris* ]]; echo $?)"

kill -TERM "$serve_pid"
rc=0
wait "$serve_pid" || rc=$?
serve_pid=""
check "SIGTERM: serve.sh exits 0 (got $rc)" "$([[ $rc == 0 ]]; echo $?)"
alive=""
for _ in $(seq 1 100); do
  alive=""
  for c in $children; do kill -0 "$c" 2>/dev/null && alive+=" $c"; done
  [[ -z $alive ]] && break
  sleep 0.1
done
check "SIGTERM: every server it started has exited" "$([[ -z $alive ]]; echo $?)"

echo "$passed passed, $failures failed"
if ((failures)); then
  echo "--- serve.sh stdout"; cat "$work/out"; echo "--- stderr"; cat "$work/err"
  exit 1
fi
