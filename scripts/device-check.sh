#!/usr/bin/env bash
# The one prepared run on a machine with an NVIDIA GPU (the H200 device
# machine): builds the engine with the CUDA backend, runs the CUDA tests, runs
# the GPU benchmark, and writes logs and summary.json into $OUT (./device-out
# when $OUT is unset). Budget: 8 minutes, building included.
#
# That machine has CUDA, CMake, ninja and Python but none of Debian's -dev
# packages: run scripts/fetch-device-deps.sh here first and carry
# .device-deps with the call (docs/gpu.md has the exact call). The 98 MB
# SmolLM2 file cannot travel (64 MiB a call), so the benchmark writes random
# GGUF models of SmolLM2's exact shapes and types, and of Llama-3-8B's shapes
# (4 of its 32 layers, bf16), with build-device/bin/llm-random-model.
#
# Files in $OUT: steps.log (what ran, with times), nvidia-smi.txt, build.log,
# tests.log, bench.log, summary.json.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/device-out}
mkdir -p "$OUT"
START=$(date +%s)
DEADLINE=$((START + 450))  # leaves room under an 8-minute call for the summary
JOBS=$(nproc)
step() { echo "[device-check +$(($(date +%s) - START))s] $*" | tee -a "$OUT/steps.log"; }
# Seconds left before the deadline, at most $1.
budget() {
  local left=$((DEADLINE - $(date +%s)))
  ((left < $1)) && echo $((left > 1 ? left : 1)) || echo "$1"
}
# summary.json, written on exit (also when the script stops early).
summarize() {
python3 - "$OUT" <<'PY'
import glob, json, os, sys
out = sys.argv[1]
summary = {"tests": {}, "bench": {}}
for path in glob.glob("/tmp/cuda_*_test.json") + glob.glob("/tmp/backend_factory_test.json"):
    r = json.load(open(path))
    failed = [f'{s["name"]}.{c["name"]}' for s in r.get("testsuites", [])
              for c in s.get("testsuite", []) if c.get("failures")]
    skipped = [f'{s["name"]}.{c["name"]}' for s in r.get("testsuites", [])
               for c in s.get("testsuite", []) if c.get("result") == "SKIPPED"]
    summary["tests"][os.path.basename(path)[:-5]] = {
        "tests": r.get("tests"), "failures": r.get("failures"), "failed": failed,
        "skipped": skipped}
for path in glob.glob("/tmp/bench-*.json"):
    try:
        summary["bench"][os.path.basename(path)[6:-5]] = json.load(open(path))
    except ValueError:
        summary["bench"][os.path.basename(path)[6:-5]] = "no result"
b = summary["bench"]
def get(name, *keys):
    v = b.get(name)
    for k in keys:
        v = v.get(k) if isinstance(v, dict) else None
    return v
one, many = get("smollm2-cuda", "aggregate_decode_tok_s", "1"), get("smollm2-cuda", "aggregate_decode_tok_s", "64")
summary["targets"] = {
    "smollm2_decode_tok_s (>= 5000)": get("smollm2-cuda", "decode_tok_s"),
    "llama3_8b_decode_roofline_fraction (>= 0.75)": get("llama3-8b-4l-cuda", "decode_roofline_fraction"),
    "sessions_64_over_1 (>= 20)": round(many / one, 2) if one and many else None,
}
json.dump(summary, open(os.path.join(out, "summary.json"), "w"), indent=1)
print(json.dumps(summary["targets"], indent=1))
PY
}
trap 'summarize' EXIT

step "machine: $(nproc) cores; $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1)"
nvidia-smi >"$OUT/nvidia-smi.txt" 2>&1
step "$(cmake --version | head -1); $(g++ --version | head -1); $(nvcc --version 2>/dev/null | tail -1)"

# 1. Dependencies from .device-deps (Debian 12 packages, unpacked, not installed).
PREFIX=/tmp/llm-device-deps
if compgen -G ".device-deps/*.deb" >/dev/null; then
  for deb in .device-deps/*.deb; do dpkg -x "$deb" "$PREFIX"; done
  step "unpacked $(ls .device-deps/*.deb | wc -l) packages into $PREFIX"
else
  step "no .device-deps: using the machine's own Abseil, GoogleTest and nlohmann_json"
fi
export LD_LIBRARY_PATH="$PREFIX/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
NVCC=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)

# 2. Configure and build only what this run needs, with every core.
step "configure (cuda-device preset, nvcc $NVCC)"
cmake --preset cuda-device -DCMAKE_PREFIX_PATH="$PREFIX/usr" -DCMAKE_CUDA_COMPILER="$NVCC" \
  -DLLM_CUDA_WERROR=OFF \
  >"$OUT/build.log" 2>&1 || { step "configure FAILED (build.log)"; exit 1; }
step "build"
cmake --build build-device -j"$JOBS" --target cuda_backend_test cuda_model_test \
  backend_factory_test llm_cuda llm_bench_tool llm_random_model_tool >>"$OUT/build.log" 2>&1 ||
  { step "build FAILED (build.log)"; tail -40 "$OUT/build.log"; exit 1; }
BIN=build-device/bin
grep -q "CUDA backend: on" "$OUT/build.log" || step "WARNING: the CUDA backend was not configured"

# 3. The CUDA tests (op parity, whole model against the CPU, invariants).
TESTS_OK=1
for t in backend_factory_test cuda_backend_test cuda_model_test; do
  step "test $t"
  timeout "$(budget 200)" "$BIN/$t" --gtest_output="json:/tmp/$t.json" >>"$OUT/tests.log" 2>&1 ||
    TESTS_OK=0
done
# On a GPU machine nothing may skip (but the no-device case's own test).
if grep '^\[  SKIPPED \]' "$OUT/tests.log" | grep -v ClearErrorWithoutADevice |
  grep -v CudaWithoutADeviceSaysWhy | grep -q .; then
  step "tests SKIPPED on a GPU machine (tests.log)"
  TESTS_OK=0
fi
step "tests: $([ $TESTS_OK = 1 ] && echo passed || echo FAILED) (tests.log)"

# 4. The benchmark: SmolLM2 shapes (pp512, tg128, 1/16/64 sessions) and an
#    8B-shaped bf16 model against the bandwidth roofline (4.8 TB/s).
MODELS=/tmp/llm-device-models
mkdir -p "$MODELS"
bench() {  # name, then llm-bench flags
  local name=$1
  shift
  if (($(budget 60) < 30)); then
    step "bench $name: skipped, out of time"
    return
  fi
  step "bench $name: llm-bench $*"
  if timeout "$(budget 150)" "$BIN/llm-bench" "$@" >"/tmp/bench-$name.json" \
    2>>"$OUT/bench.log"; then
    echo "$name $(cat "/tmp/bench-$name.json")" >>"$OUT/bench.log"
  else
    echo "$name FAILED" >>"$OUT/bench.log"
  fi
}
"$BIN/llm-random-model" --shape smollm2 --out "$MODELS/smollm2.gguf" >>"$OUT/bench.log" 2>&1
bench smollm2-cuda --model "$MODELS/smollm2.gguf" --backend cuda -p 512 -n 128 \
  --repetitions 3 --sessions 1,16,64 --kv_cache_mb 1024 --roofline_gb_s 4800
bench smollm2-cuda-nographs --model "$MODELS/smollm2.gguf" --backend cuda --cuda_graphs=false \
  -p 0 -n 128 --repetitions 3
bench smollm2-cpu --model "$MODELS/smollm2.gguf" --backend cpu --threads "$JOBS" -p 512 -n 128 \
  --repetitions 2
if (($(budget 120) >= 100)); then
  step "write the 8B-shaped model"
  timeout "$(budget 90)" "$BIN/llm-random-model" --shape llama3-8b --layers 4 \
    --out "$MODELS/llama3-8b-4l.gguf" >>"$OUT/bench.log" 2>&1
fi
bench llama3-8b-4l-cuda --model "$MODELS/llama3-8b-4l.gguf" --backend cuda -p 512 -n 64 \
  --repetitions 2 --kv_cache_mb 1024 --roofline_gb_s 4800
rm -rf "$MODELS"

step "done; tests $([ $TESTS_OK = 1 ] && echo passed || echo FAILED)"
[ $TESTS_OK = 1 ]
