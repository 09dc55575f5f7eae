#!/usr/bin/env bash
# Runs a benchmark command and reports, beside its figures, how busy the
# machine was with other work while it ran; optionally pins it to CPUs.
#
#     bench/quiet.sh [--cpus LIST] [--] COMMAND [ARGS...]
#     bench/quiet.sh python3 bench/speculative_bench.py --rounds 5
#     bench/quiet.sh --cpus 0-1 build/bin/llm-bench --threads 2 -p 64 -n 32
#
# --cpus LIST runs the command under `taskset -c LIST` (its children inherit
# the mask). When the command ends, one line on stderr gives the wall time,
# the CPU time of the command and its children, the CPU time the rest of the
# machine used meanwhile (from /proc/stat; as an average number of busy CPUs),
# and the load average before and after, e.g.
#
#     quiet.sh: 12.3 s wall on 2 CPUs; the command 10.1 CPU-s (0.82 CPUs),
#     other processes 4.2 CPU-s (0.34 CPUs); load average 1.20 -> 2.31
#
# On a 2-core machine a build or a fuzzer beside a benchmark moves its figures
# by tens of percent: quote that line with the figures, and rerun when the
# other processes' share is high. The script never signals, pauses or renices a
# process: a benchmark must not stop processes it did not start. Exits with the
# command's status (2 for a usage error).
set -uo pipefail

usage() { sed -n '2,24p' "$0" | sed 's/^# \{0,1\}//'; }
cpus=""
while [[ $# -gt 0 ]]; do
  case $1 in
    --cpus) [[ $# -ge 2 && -n $2 ]] || { echo "quiet.sh: --cpus needs a CPU list" >&2; exit 2; }
      cpus=$2; shift 2 ;;
    --cpus=*) cpus=${1#--cpus=}; shift ;;
    -h|--help) usage; exit 0 ;;
    --) shift; break ;;
    -*) echo "quiet.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
    *) break ;;
  esac
done
[[ $# -gt 0 ]] || { echo "quiet.sh: no command given (see --help)" >&2; exit 2; }
runner=()
if [[ -n $cpus ]]; then
  command -v taskset >/dev/null || { echo "quiet.sh: --cpus needs taskset (util-linux)" >&2; exit 2; }
  taskset -c "$cpus" true 2>/dev/null || { echo "quiet.sh: --cpus '$cpus' is not a usable CPU list" >&2; exit 2; }
  runner=(taskset -c "$cpus")
fi

# The machine's busy jiffies (user, nice, system, irq, softirq) from /proc/stat.
busy_jiffies() {
  local _ user nice system irq softirq
  read -r _ user nice system _ _ irq softirq _ </proc/stat  # _ _: idle, iowait
  echo $((user + nice + system + irq + softirq))
}
# Sets the variable named $1 to the CPU seconds (user + system) of this
# shell's waited-for children so far. `times` must run in this shell, not in a
# $(...) subshell (whose children are others), so it writes to a file.
times_file=$(mktemp)
trap 'rm -f "$times_file"' EXIT
children_cpu() {
  times >"$times_file"
  printf -v "$1" '%s' "$(awk 'NR == 2 { gsub(/[ms]/, " "); print $1 * 60 + $2 + $3 * 60 + $4 }' \
    "$times_file")"
}

cpu_before="" cpu_after=""
hz=$(getconf CLK_TCK)
ncpu=$(nproc --all)
load_before=$(cut -d' ' -f1 /proc/loadavg)
children_cpu cpu_before
start_ns=$(date +%s%N)
busy_before=$(busy_jiffies)
"${runner[@]}" "$@"
rc=$?
busy_after=$(busy_jiffies)
end_ns=$(date +%s%N)
children_cpu cpu_after
load_after=$(cut -d' ' -f1 /proc/loadavg)

awk -v wall_ns=$((end_ns - start_ns)) -v busy=$((busy_after - busy_before)) -v hz="$hz" \
    -v mine="$cpu_before $cpu_after" -v ncpu="$ncpu" -v lb="$load_before" -v la="$load_after" \
    -v cpus="$cpus" 'BEGIN {
  split(mine, m, " "); own = m[2] - m[1]; wall = wall_ns / 1e9; if (wall <= 0) wall = 1e-9
  other = busy / hz - own; if (other < 0) other = 0
  printf "quiet.sh: %.1f s wall on %d CPUs%s; the command %.1f CPU-s (%.2f CPUs), " \
         "other processes %.1f CPU-s (%.2f CPUs); load average %s -> %s\n",
         wall, ncpu, cpus == "" ? "" : " (pinned to " cpus ")", own, own / wall,
         other, other / wall, lb, la
}' >&2
exit $rc
