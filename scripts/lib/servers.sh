# Starting the project's servers from a shell script (sourced by scripts/run.sh
# and scripts/serve.sh).
#
# start_server DIR NAME [FLAGS...]
#   Starts build/bin/NAME --listen 127.0.0.1:0 FLAGS... in the background, its
#   stdout in DIR/NAME.out and its stderr in DIR/NAME.log (and, when
#   `show_server_stderr` is 1, also on this script's stderr as it comes),
#   appends its pid to the array `pids` and NAME to `pid_names` (so that the
#   caller's EXIT trap can stop it), and waits up to 30 s for its "listening
#   on port N" line; sets `port` to N. Returns 1, with the server's log on
#   stderr, if the server exits or does not start. Not to be called in a
#   $(...) subshell: `pids` and `port` must reach the caller. Safe under
#   `set -euo pipefail`.
#
# start_services MODEL
#   Makes a temporary directory `tmp`, starts tokenizer_server and
#   model_server of MODEL with start_server (adding the arrays
#   `tokenizer_flags` and `model_flags`, when set, to their flags), and waits
#   until both are SERVING (`llm health`, up to 120 s); sets `tok` and `model`
#   to their addresses. Sets an EXIT trap that stops every server in `pids`
#   (also those the caller starts later) and removes `tmp`, and makes INT and
#   TERM exit 130. Exits 1, with the servers' logs on stderr, when they do not
#   come up.

# The port of a "NAME: listening on port N" line in FILE; "" while there is
# none yet, or while FILE does not exist yet (the background process creates
# it, and may not have done so when the first look comes).
port_from_output() {
  sed -n 's/.*listening on port \([0-9]*\).*/\1/p' "$1" 2>/dev/null || true
}

start_server() {
  local dir=$1 name=$2
  shift 2
  local out="$dir/$name.out" log="$dir/$name.log"
  : >"$out"
  : >"$log"
  if [[ ${show_server_stderr:-0} == 1 ]]; then
    "${LLM_BIN_DIR:-build/bin}/$name" --listen 127.0.0.1:0 "$@" >"$out" \
      2> >(tee -a "$log" >&2) &
  else
    "${LLM_BIN_DIR:-build/bin}/$name" --listen 127.0.0.1:0 "$@" >"$out" 2>"$log" &
  fi
  local pid=$!
  pids+=("$pid")
  pid_names+=("$name")
  port=""
  local _
  for _ in $(seq 1 300); do
    port=$(port_from_output "$out")
    [[ -n $port ]] && return 0
    if ! kill -0 "$pid" 2>/dev/null; then
      [[ ${show_server_stderr:-0} == 1 ]] || cat "$log" >&2
      echo "$name exited before it listened" >&2
      return 1
    fi
    sleep 0.1
  done
  [[ ${show_server_stderr:-0} == 1 ]] || cat "$log" >&2
  echo "$name did not start within 30 s" >&2
  return 1
}

stop_servers() {
  local p
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$tmp"
}

start_services() {
  tmp=$(mktemp -d)
  pids=()
  pid_names=()
  trap stop_servers EXIT
  trap 'exit 130' INT TERM
  start_server "$tmp" tokenizer_server --vocab "$1" ${tokenizer_flags[@]+"${tokenizer_flags[@]}"} \
    || exit 1
  tok=127.0.0.1:$port
  start_server "$tmp" model_server --model "$1" ${model_flags[@]+"${model_flags[@]}"} || exit 1
  model=127.0.0.1:$port
  if ! "${LLM_BIN_DIR:-build/bin}/llm" health --tokenizer "$tok" --model "$model" --wait 120 \
      >"$tmp/health" 2>&1; then
    cat "$tmp/health" >&2
    [[ ${show_server_stderr:-0} == 1 ]] || cat "$tmp"/*.log >&2
    exit 1
  fi
}
