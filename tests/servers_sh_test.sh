#!/usr/bin/env bash
# Tests of scripts/lib/servers.sh (start_server, used by scripts/run.sh) with
# stand-in servers: shell scripts that print the port line, or exit.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/servers.sh

source tests/lib/check.sh  # check NAME STATUS; passed, failures

work=$(mktemp -d)
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$work"' EXIT
export LLM_BIN_DIR="$work/bin"
mkdir -p "$LLM_BIN_DIR"

# The first look at a server's output may come before the background process
# has created the file: that is "no port yet", not an error that ends a
# `set -e` script (scripts/run.sh failed so, once in six runs, on a busy machine).
rc=0
got=$(port_from_output "$work/not-created-yet.out") || rc=$?
check "port_from_output of a missing file is empty and succeeds" "$([[ $rc == 0 && -z $got ]]; echo $?)"

# A server that prints its port line after a while.
cat >"$LLM_BIN_DIR/slow_server" <<'SH'
#!/usr/bin/env bash
sleep 0.3
echo "slow_server: listening on port 4242"
exec sleep 30
SH
# A server that fails at once.
cat >"$LLM_BIN_DIR/failing_server" <<'SH'
#!/usr/bin/env bash
echo "failing_server: cannot listen on 127.0.0.1:0" >&2
exit 1
SH
chmod +x "$LLM_BIN_DIR"/*

port=""
rc=0
start_server "$work" slow_server --flag x || rc=$?
check "start_server waits for the port line" "$([[ $rc == 0 && $port == 4242 ]]; echo $?)"
check "start_server records the pid" "$([[ ${#pids[@]} == 1 ]]; echo $?)"

rc=0
err=$(start_server "$work" failing_server 2>&1) || rc=$?
check "start_server fails when the server exits" "$([[ $rc == 1 ]]; echo $?)"
check "and shows its log" "$([[ $err == *"cannot listen"* && $err == *"exited before it listened"* ]]; echo $?)"

# Many starts in a row, none of which may fail on a missing output file.
rc=0
for i in $(seq 1 20); do
  cat >"$LLM_BIN_DIR/quick_server_$i" <<SH
#!/usr/bin/env bash
echo "quick_server_$i: listening on port $((5000 + i))"
exec sleep 30
SH
  chmod +x "$LLM_BIN_DIR/quick_server_$i"
  start_server "$work" "quick_server_$i" || rc=$?
  [[ $port == $((5000 + i)) ]] || rc=1
done
check "twenty quick starts" "$([[ $rc == 0 ]]; echo $?)"

echo "$passed passed, $failures failed"
[[ $failures == 0 ]]
