#!/usr/bin/env bash
# The gateway over curl, as a user of docs/gateway.md would speak to it: every
# endpoint, and every error status of its error table with the OpenAI error
# shape ({"error": {"message", "type", "param", "code"}}).
#
#   /health (GET, HEAD), /v1/models, /v1/models/{id}, /metrics, /tokenize,
#   /detokenize, /v1/chat/completions non-streamed and streamed (SSE, [DONE],
#   usage chunk);
#   400 malformed JSON, bad parameters (param named), a refused field, the
#   chat template's own error, a prompt over the context
#   (context_length_exceeded); 404 unknown model / path; 405 wrong method; 413
#   body over --max_body_bytes; 429 --max_concurrent 1 with a stream in flight;
#   503 the model service killed (and a stream in flight ending with an error
#   event, without [DONE]);
#   a client that disconnects mid-stream frees its generation:
#   llm_gateway_generations_active returns to 0 and the next request (still
#   --max_concurrent 1) succeeds.
# Not covered: 500 (no request reaches "anything else" on purpose).
#
# JSON is checked with python3 (jq is not among scripts/setup.sh's packages).
# Needs models/SmolLM2-135M-Instruct.Q4_1.gguf and the built binaries.
#
# Usage: tests/gateway_curl_test.sh [BUILD_DIR]   (ctest: gateway_curl_test)
set -euo pipefail
BUILD=$(realpath "${1:-build}")
cd "$(dirname "$0")/.."
MODEL=models/SmolLM2-135M-Instruct.Q4_1.gguf
[[ -f $MODEL ]] || { echo "gateway_curl_test: $MODEL missing (run scripts/fetch-model.sh)"; exit 1; }
export LLM_BIN_DIR=$BUILD/bin

# start_services, start_server: scripts/lib/servers.sh (sets tmp, tok, model,
# port, pids; its EXIT trap stops every server).
source scripts/lib/servers.sh
start_services "$MODEL"
model_pid=${pids[1]}
MAX_BODY=65536
start_server "$tmp" llm_gateway --tokenizer "$tok" --model "$model" --max_concurrent 1 \
  --max_body_bytes $MAX_BODY --reconnect_timeout 1 --timeout 10
url=http://127.0.0.1:$port
bg=()  # background curls, killed on exit
trap 'for p in "${bg[@]}"; do kill "$p" 2>/dev/null || true; done; stop_servers' EXIT

passed=0
failed=0
pass() { passed=$((passed + 1)); echo "ok   $1"; }
fail() {
  failed=$((failed + 1))
  echo "FAIL $1: $2"
  [[ -f $tmp/body ]] && head -c 2000 "$tmp/body" && echo
}

# req METHOD PATH [CURL ARGS...]: the response body in $tmp/body, headers in
# $tmp/headers, the status in $code.
req() {
  local method=$1 path=$2
  shift 2
  code=$(curl -sS -X "$method" -o "$tmp/body" -D "$tmp/headers" -w '%{http_code}' \
    -H 'Content-Type: application/json' "$@" "$url$path") || code=000
}
# jtrue EXPR: EXPR (Python, over j = the body's JSON, and text = the body) holds.
jtrue() {
  python3 - "$tmp/body" "$1" <<'PY'
import json, sys
text = open(sys.argv[1], encoding="utf-8", errors="replace").read()
try:
    j = json.loads(text)
except ValueError:
    j = None
sys.exit(0 if eval("(" + sys.argv[2] + ")") else 1)
PY
}
# expect NAME STATUS [EXPR]: the status is STATUS and EXPR holds.
expect() {
  local name=$1 status=$2 expr=${3:-True}
  if [[ $code != "$status" ]]; then
    fail "$name" "status $code, want $status"
  elif ! jtrue "$expr"; then
    fail "$name" "not true: $expr"
  else
    pass "$name"
  fi
}
# expect_error NAME STATUS [PARAM [CODE]]: an OpenAI error object.
expect_error() {
  local name=$1 status=$2 param=${3:-} ecode=${4:-}
  local expr='set(j) == {"error"} and set(j["error"]) == {"message", "type", "param", "code"}
    and isinstance(j["error"]["message"], str) and j["error"]["message"]
    and isinstance(j["error"]["type"], str)'
  [[ -n $param ]] && expr+=" and j['error']['param'] == '$param'"
  [[ -n $ecode ]] && expr+=" and j['error']['code'] == '$ecode'"
  expect "$name" "$status" "$expr"
}
# sse_true FILE EXPR: EXPR holds over the SSE body in FILE: events (the JSON
# of each data: line but [DONE]), done (whether [DONE] came), text (the
# content deltas of choice 0), finish (its finish_reason).
sse_true() {
  python3 - "$1" "$2" <<'PY'
import json, os, sys
events, done = [], False
for line in open(sys.argv[1], encoding="utf-8").read().split("\n"):
    if line.startswith("data: "):
        if line[6:] == "[DONE]":
            done = True
        else:
            events.append(json.loads(line[6:]))
text = "".join(c["delta"].get("content") or "" for e in events for c in e.get("choices", [])
               if c["index"] == 0)
finish = [c["finish_reason"] for e in events for c in e.get("choices", [])
          if c.get("finish_reason")]
finish = finish[-1] if finish else None
sys.exit(0 if eval("(" + sys.argv[2] + ")") else 1)
PY
}
metric() {  # metric NAME: its value in /metrics (-1 when absent)
  curl -sS "$url/metrics" | awk -v n="$1" '$1 == n {print $2; found=1} END {if (!found) print -1}'
}
chat() {  # chat CONTENT [EXTRA JSON FIELDS]: a request body
  printf '{"model": "%s", "messages": [{"role": "user", "content": "%s"}], "temperature": 0%s}' \
    "$model_id" "$1" "${2:+, $2}"
}
Q="What is the capital of France? Answer in one word."

# -- endpoints -------------------------------------------------------------------
req GET /health
expect "GET /health" 200 "j['status'] == 'ok' and j['tokenizer'] == {'$tok': 'SERVING'}
  and j['model'] == {'$model': 'SERVING'}"
code=$(curl -sS -I -o /dev/null -w '%{http_code}' "$url/health")
[[ $code == 200 ]] && pass "HEAD /health" || fail "HEAD /health" "status $code"

req GET /v1/models
expect "GET /v1/models" 200 "j['object'] == 'list' and len(j['data']) == 1
  and j['data'][0]['object'] == 'model' and j['data'][0]['context_length'] == 8192"
model_id=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["data"][0]["id"])' \
  "$tmp/body")
req GET "/v1/models/$model_id"
expect "GET /v1/models/{id}" 200 "j['id'] == '$model_id' and j['owned_by'] and j['created'] > 0"

req POST /tokenize -d "{\"model\": \"$model_id\", \"prompt\": \"<|im_start|>Paris\"}"
expect "POST /tokenize" 200 "j['tokens'][0] == 1 and j['count'] == len(j['tokens'])
  and j['max_model_len'] == 8192"
tokens=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["tokens"])' "$tmp/body")
req POST /tokenize -d '{"prompt": "<|im_start|>Paris", "add_special_tokens": false}'
expect "POST /tokenize add_special_tokens false" 200 "j['count'] > len($tokens)"
req POST /detokenize -d "{\"tokens\": $tokens}"
expect "POST /detokenize (round trip)" 200 "j == {'prompt': '<|im_start|>Paris'}"

req POST /v1/chat/completions -d "$(chat "$Q" '"max_tokens": 32')"
expect "POST /v1/chat/completions" 200 "j['object'] == 'chat.completion'
  and 'Paris' in j['choices'][0]['message']['content']
  and j['choices'][0]['finish_reason'] == 'stop'
  and j['usage']['total_tokens'] == j['usage']['prompt_tokens'] + j['usage']['completion_tokens']"
grep -qi '^content-type: application/json' "$tmp/headers" \
  && pass "chat Content-Type application/json" || fail "chat Content-Type" "$(cat "$tmp/headers")"
answer=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["choices"][0]["message"]["content"])' "$tmp/body")
completion=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["usage"]["completion_tokens"])' "$tmp/body")

curl -sS -N -D "$tmp/headers" -o "$tmp/stream" -H 'Content-Type: application/json' \
  "$url/v1/chat/completions" \
  -d "$(chat "$Q" '"max_tokens": 32, "stream": true, "stream_options": {"include_usage": true}')"
if grep -qi '^content-type: text/event-stream' "$tmp/headers" && ANSWER=$answer sse_true \
    "$tmp/stream" "done and text == os.environ['ANSWER'] and finish == 'stop'
    and events[0]['choices'][0]['delta']['role'] == 'assistant'
    and all(e['object'] == 'chat.completion.chunk' for e in events)
    and events[-1]['choices'] == [] and events[-1]['usage']['completion_tokens'] == $completion"; then
  pass "POST /v1/chat/completions stream (SSE, same text, usage chunk, [DONE])"
else
  fail "POST /v1/chat/completions stream" "$(head -c 3000 "$tmp/stream")"
fi

req GET /metrics
if [[ $code == 200 ]] && grep -qi '^content-type: text/plain' "$tmp/headers" \
    && grep -q '^llm_gateway_requests_total{code="200",endpoint="/v1/chat/completions"} 2' "$tmp/body" \
    && grep -q '^llm_gateway_generations_active 0' "$tmp/body" \
    && grep -q '^llm_gateway_time_to_first_token_seconds_count 2' "$tmp/body" \
    && grep -q '^llm_gateway_tokens_total{kind="completion"} '$((2 * completion)) "$tmp/body"; then
  pass "GET /metrics (two chats counted, their tokens, none active)"
else
  fail "GET /metrics" "status $code"
fi

# -- errors ----------------------------------------------------------------------
req POST /v1/chat/completions -d '{not json'
expect_error "400 malformed JSON (chat)" 400
req POST /tokenize -d '[1, 2'
expect_error "400 malformed JSON (tokenize)" 400
req POST /v1/chat/completions -d "$(chat "$Q" '"top_p": 7')"
expect_error "400 bad parameter names it (top_p)" 400 top_p
req POST /v1/chat/completions -d "$(chat "$Q" '"temperature": "warm"')"
expect_error "400 bad parameter names it (temperature)" 400 temperature
req POST /v1/chat/completions -d "{\"model\": \"$model_id\", \"messages\": [{\"role\": \"user\", \"content\": \"hi\"}, {\"role\": \"wizard\", \"content\": \"x\"}]}"
expect_error "400 bad parameter names it (messages[1].role)" 400 'messages[1].role'
req POST /v1/chat/completions -d "$(chat "$Q" '"functions": [{"name": "f"}]')"
expect_error "400 a refused field names it (functions)" 400 functions
req POST /v1/chat/completions -d "$(chat "$Q" '"tools": [{"type": "function"}]')"
expect_error "400 a bad tool names it (tools[0].function)" 400 'tools[0].function'
req POST /detokenize -d '{"tokens": [-1]}'
expect_error "400 bad token id (detokenize)" 400 tokens
long=$(python3 -c 'print(" cat" * 10000)')
req POST /v1/chat/completions -d "$(chat "$long")"
expect_error "400 prompt over the context" 400 messages context_length_exceeded

# A template that raises (raise_exception, as Hugging Face templates do), on a
# second gateway over the same services.
mkdir -p "$tmp/tmpl"
cat >"$tmp/tmpl/strict.jinja" <<'JINJA'
{%- for message in messages %}{% if message['role'] == 'system' %}{{ raise_exception('no system messages here') }}{% endif %}<|im_start|>{{ message['role'] }}
{{ message['content'] }}<|im_end|>
{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant
{% endif %}
JINJA
start_server "$tmp/tmpl" llm_gateway --tokenizer "$tok" --model "$model" \
  --template "$tmp/tmpl/strict.jinja"
saved_url=$url
url=http://127.0.0.1:$port
req POST /v1/chat/completions -d "{\"model\": \"$model_id\", \"messages\": [{\"role\": \"system\", \"content\": \"be brief\"}, {\"role\": \"user\", \"content\": \"hi\"}]}"
expect_error "400 the chat template's error" 400 messages
expect "  ... naming the template's message" 400 "'no system messages here' in j['error']['message']"
url=$saved_url

req POST /v1/chat/completions -d "$(chat "$Q" '"model": "gpt-4"')"
expect_error "404 unknown model (chat)" 404 model model_not_found
req GET /v1/models/gpt-4
expect_error "404 unknown model (/v1/models/{id})" 404 model model_not_found
req POST /tokenize -d '{"model": "gpt-4", "prompt": "x"}'
expect_error "404 unknown model (tokenize)" 404 model model_not_found
req GET /v1/nothing
expect_error "404 unknown path" 404
for m_p in "GET /v1/chat/completions" "POST /v1/models" "POST /health" "POST /metrics" \
    "GET /tokenize" "GET /detokenize"; do
  req ${m_p% *} "${m_p#* }"
  expect_error "405 $m_p" 405
done
python3 -c "
import json, sys
print(json.dumps({'model': sys.argv[1], 'messages': [{'role': 'user', 'content': 'a' * $MAX_BODY}]}))
" "$model_id" >"$tmp/big.json"
req POST /v1/chat/completions --data-binary "@$tmp/big.json"
expect_error "413 body over --max_body_bytes" 413

# -- 429, and a client that disconnects mid-stream -------------------------------
# A long stream (EOS banned, 4000 tokens: minutes if it ran to its end) holds
# the only slot; curl is then killed, closing the connection.
long_stream() {  # long_stream FILE: starts it in the background; sets stream_pid
  curl -sS -N -o "$1" -H 'Content-Type: application/json' "$url/v1/chat/completions" \
    -d "$(chat "Tell me a long story." '"stream": true, "max_tokens": 4000, "temperature": 1.0, "logit_bias": {"2": -100}')" &
  stream_pid=$!
  bg+=("$stream_pid")
  local _
  for _ in $(seq 1 300); do  # up to 30 s for the role chunk and 5 tokens
    (($(cat "$1" 2>/dev/null | grep -c '^data: ' || true) >= 6)) && return 0
    sleep 0.1
  done
  return 1
}
if long_stream "$tmp/long1"; then
  pass "a long stream runs"
  active=$(metric llm_gateway_generations_active)
  [[ $active == 1 ]] && pass "generations_active is 1 while it runs" \
    || fail "generations_active while streaming" "$active"
  req POST /v1/chat/completions -d "$(chat "$Q" '"max_tokens": 4')"
  expect_error "429 --max_concurrent 1 with a stream in flight" 429
  kill "$stream_pid"
  wait "$stream_pid" 2>/dev/null || true
  closed=$(date +%s.%N)
  active=-1
  for _ in $(seq 1 100); do
    active=$(metric llm_gateway_generations_active)
    [[ $active == 0 ]] && break
    sleep 0.05
  done
  took=$(python3 -c "import time; print(f'{time.time() - $closed:.2f}')")
  [[ $active == 0 ]] && pass "disconnect: generations_active back to 0 (${took} s)" \
    || fail "disconnect: generations_active" "still $active after 5 s"
  req POST /v1/chat/completions -d "$(chat "$Q" '"max_tokens": 4')"
  expect "disconnect: the next request gets the freed slot" 200 \
    "j['choices'][0]['finish_reason'] in ('stop', 'length')"
else
  fail "a long stream runs" "$(cat "$tmp/long1")"
fi

# -- 503 and an error mid-stream: the model service killed ------------------------
if long_stream "$tmp/long2"; then
  kill -KILL "$model_pid"
  wait "$stream_pid" 2>/dev/null || true
  if sse_true "$tmp/long2" "not done and 'error' in events[-1]
      and events[-1]['error']['type'] and events[-1]['error']['message']"; then
    pass "an error mid-stream: a data: {\"error\": ...} event, no [DONE]"
  else
    fail "an error mid-stream" "$(tail -c 1000 "$tmp/long2")"
  fi
else
  fail "a long stream runs (before the kill)" "$(cat "$tmp/long2")"
  kill -KILL "$model_pid"
fi
req GET /health
expect "503 /health with the model service down" 503 "j['status'] == 'unavailable'
  and j['model']['$model'].startswith('NOT SERVING')"
req POST /v1/chat/completions -d "$(chat "$Q" '"max_tokens": 4')"
expect_error "503 chat with the model service down" 503

echo "$passed passed, $failed failed"
((failed == 0))
