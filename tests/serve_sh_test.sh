#!/usr/bin/env bash
# scripts/serve.sh as a user runs it (with --no-build: the build is ctest's):
# it prints "gateway listening on http://127.0.0.1:PORT" once all three servers
# are healthy, the gateway answers /health and a chat ("Paris"), and SIGTERM
# stops the tokenizer server, the model server and the gateway and exits 0.
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

scripts/serve.sh --no-build --port 0 >"$work/out" 2>"$work/err" &
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
