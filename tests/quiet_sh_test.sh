#!/usr/bin/env bash
# bench/quiet.sh: runs the command it is given, passes its exit status on,
# pins it with --cpus, reports the machine's load on stderr, and leaves every
# other process alone (a bystander whose command line names ninja, cc1plus,
# ctest and a fuzzer, which an earlier version SIGSTOPped, keeps running).
#
#   bash tests/quiet_sh_test.sh
set -euo pipefail
cd "$(dirname "$0")/.."

source tests/lib/check.sh  # check NAME STATUS; passed, failures

work=$(mktemp -d)
bystander=""
trap '[[ -n $bystander ]] && kill "$bystander" 2>/dev/null; rm -rf "$work"' EXIT
bash -c 'exec -a "ninja cc1plus ctest encode_fuzzer" sleep 60' &
bystander=$!

# The command looks at the bystander's state ("S" sleeping; "T" stopped) while
# quiet.sh runs, and exits 3.
rc=0
bench/quiet.sh bash -c "sleep 0.3; cut -d' ' -f3 /proc/$bystander/stat; exit 3" \
  >"$work/out" 2>"$work/err" || rc=$?
state=$(cat "$work/out")
check "the command's exit status comes back (3, got $rc)" "$([[ $rc == 3 ]]; echo $?)"
check "a bystander named like a build or a fuzzer is not stopped (state '$state')" \
  "$([[ $state == S ]]; echo $?)"
check "the load report is on stderr" \
  "$(grep -Eq '^quiet.sh: [0-9.]+ s wall on [0-9]+ CPUs; the command [0-9.]+ CPU-s \([0-9.]+ CPUs\), other processes [0-9.]+ CPU-s \([0-9.]+ CPUs\); load average' "$work/err"; echo $?)"

# A busy loop that runs until it has used 1 CPU-second of its own (not for a
# wall time: on a loaded machine that is less CPU time): counted as its own.
bench/quiet.sh python3 -c '
import time
start = time.process_time()
while time.process_time() - start < 1.0:
    pass' 2>"$work/err"
own=$(sed -n 's/.*; the command \([0-9.]*\) CPU-s.*/\1/p' "$work/err")
check "the command's own CPU time is counted ($own CPU-s for a loop of 1 CPU-s)" \
  "$(awk -v o="$own" 'BEGIN { exit !(o >= 0.9) }'; echo $?)"

out=$(bench/quiet.sh --cpus 0 grep Cpus_allowed_list /proc/self/status 2>"$work/err")
check "--cpus 0 pins the command ('$out')" "$([[ $out == *$'\t'0 ]]; echo $?)"
check "and the report says so" "$(grep -q 'pinned to 0' "$work/err"; echo $?)"

for args in "" "--cpus" "--cpus 99999 true" "--frobnicate true"; do
  rc=0
  # shellcheck disable=SC2086
  bench/quiet.sh $args >/dev/null 2>"$work/err" || rc=$?
  check "quiet.sh $args: exit 2 with a message" "$([[ $rc == 2 && -s $work/err ]]; echo $?)"
done

echo "$passed passed, $failures failed"
[[ $failures == 0 ]]
